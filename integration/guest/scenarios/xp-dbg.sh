perf test --list 2>&1 | grep -i -E "spe|arm" 
perf test --list 2>&1 | wc -l
perf test --list 2>&1 | head -5
ls -la /usr/bin/mktemp
pass
