#!/bin/sh
# The filtering attributes' judge in the guest, for LAVA: the rules of
# integration/xtask/src/attributes.rs (`check`) over the table the harness
# writes from its ATTRS (attributes.tab), so that both judge by one table;
# a unit test there runs both on the same results. Not here: the
# backend's discarded count (a host-side figure).
#
#   attributes-judge.sh TABLE RESULTS KERNEL_RELEASE
#
# RESULTS holds spe-attributes.sh's KEY=VALUE lines. Prints each failure;
# exits 1 if there is one.
awk -v kernel="$3" '
function num(k) { return (k in r) ? r[k] : "" }
function bad(why) { n_bad++; print why }
function older(since,  s) {
    split(since, s, ".")
    return kmaj < s[1] + 0 || (kmaj == s[1] + 0 && kmin < s[2] + 0)
}
function member(list, x) { return index("," list ",", "," x ",") > 0 }
FNR == NR {
    if ($1 == "classes") classes = $2
    else if ($1 == "workload") workload = $2
    else if ($1 == "events") events = $2
    else if ($1 == "discard") discard_since = $2
    else {
        names[++n_attrs] = $1
        since[$1] = $2; keeps[$1] = $3; shows[$1] = $4; ev[$1] = $5
    }
    next
}
{
    i = index($0, "=")
    if (i) r[substr($0, 1, i - 1)] = substr($0, i + 1)
}
END {
    split(kernel, kv, /[.+-]/)
    kmaj = kv[1] + 0; kmin = kv[2] + 0
    nw = split(workload, w, ",")
    nc = split(classes, c, ",")
    ne = split(events, e, ",")
    for (i = 1; i <= nw; i++)
        if (num("attr_none_" w[i]) == "0")
            bad("control: no " w[i] " records without a filter")
    recs = num("attr_none_n")
    for (i = 1; i <= ne; i++) {
        # only for an event whose filter this driver runs
        tested = 0
        for (a = 1; a <= n_attrs; a++) {
            x = names[a]
            if (index(ev[x], e[i] ":") == 1 && !(("attr_" x "_absent") in r) &&
                !(("attr_" x "_refused") in r))
                tested = 1
        }
        if (!tested) continue
        n = num("attr_none_" e[i])
        if (n != "" && recs != "" && (n == 0 || n == recs))
            bad("control: " n " of " recs " records with " e[i])
    }
    for (a = 1; a <= n_attrs; a++) {
        x = names[a]
        skipped = 0
        split("absent refused", whys, " ")
        for (k = 1; k <= 2; k++)
            if (("attr_" x "_" whys[k]) in r) {
                skipped = 1
                if (!older(since[x]))
                    bad(x ": " whys[k] " by the " kmaj "." kmin " driver")
            }
        if (skipped) continue
        if (num("attr_" x "_bad") != "0") bad(x ": decoder errors")
        n_x = num("attr_" x "_n")
        if (n_x == "0") bad(x ": no records")
        for (i = 1; i <= nc; i++) {
            n = num("attr_" x "_" c[i])
            if (n == "") continue
            if (!member(keeps[x], c[i]) && n != 0) bad(x ": " n " " c[i] " records")
            if (member(shows[x], c[i]) && member(workload, c[i]) && n == 0)
                bad(x ": no " c[i] " records")
        }
        if (ev[x] != "-" && n_x != "") {
            split(ev[x], evk, ":")
            n = num("attr_" x "_" evk[1])
            want = evk[2] == "all" ? n_x : 0
            if (n != "" && n + 0 != want + 0)
                bad(x ": " n " of " n_x " records with " evk[1] ", want " want)
        }
    }
    if ("attr_discard_absent" in r) {
        if (!older(discard_since)) bad("discard: absent")
    } else {
        aux = num("attr_discard_aux_records"); irqs = num("attr_discard_irqs")
        if (aux != "" && irqs != "" && (aux != 0 || irqs != 0))
            bad("discard: " aux " AUX records, " irqs " PMBIRQs")
    }
    exit n_bad > 0
}' "$1" "$2"
