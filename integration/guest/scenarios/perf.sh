# Debian's perf and its library closure run in the guest and can count an
# event (the SPE scenarios of later issues build on this).
v=$(perf --version 2>&1) || { fail "perf does not run: $v"; return; }
result perf_version=$(echo "$v" | sed 's/^perf version //')
out=$(perf stat -x, -e cpu-clock -- true 2>&1)
ms=$(echo "$out" | grep cpu-clock | cut -d, -f1)
result perf_stat_cpu_clock_ms=${ms:-none}
if [ -n "$ms" ]; then pass; else echo "$out"; fail "perf stat gave no cpu-clock count"; fi
