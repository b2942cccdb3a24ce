# Summarizes compute-sanitizer racecheck hazard reports (--racecheck-report
# hazard or all), which look like
#   ========= Error: Potential WAR hazard detected at __shared__ 0x... in block (0,0,0) :
#   =========     Read Thread (16,0,0) at 0x75b0 in ...
#   =========     Write Thread (257,0,0) at 0x6050 in ...
#   =========     Current Value : 103, Incoming Value : 148
# into one line: hazards by kind; for WAR, whether the reader is lane 0 of
# its warp (the lane that arrives on a warp-specialized kernel's release
# mbarrier) or another lane; how many writers are producer threads
# (threadIdx.x >= prod). With -v pairs=FILE, the count of each
# (kind, read PC, write PC) goes to FILE.
#   awk -v prod=256 [-v pairs=FILE] -f scripts/racecheck-hazards.awk LOG
function flush() {
    if (cur == "")
        return
    n[cur]++
    if (cur == "WAR" && rd != "") {
        if (rd % 32 == 0) l0++
        else lx++
    }
    if (wr != "" && wr + 0 >= prod)
        wp++
    pair[cur " read " rpc " write " wpc]++
    cur = ""
}
function thread(line, who) { # threadIdx.x of "<who> Thread (x, ..."
    sub(".*" who " Thread \\(", "", line)
    sub(/[^0-9].*/, "", line)
    return line
}
function pc(line) { # the PC after " at "
    sub(/.* at /, "", line)
    sub(/ .*/, "", line)
    return line
}
/Potential [A-Z][A-Z][A-Z] hazard/ {
    flush()
    match($0, /Potential [A-Z]+/)
    cur = substr($0, RSTART + 10, 3)
    rd = wr = rpc = wpc = ""
    next
}
cur != "" && /Read Thread \(/ && rd == "" { rd = thread($0, "Read"); rpc = pc($0) }
cur != "" && /Write Thread \(/ && wr == "" { wr = thread($0, "Write"); wpc = pc($0) }
END {
    flush()
    printf "%d hazards (WAR %d: reader lane 0 %d, lanes 1-31 %d; writer producer %d; RAW %d; " \
           "WAW %d)", n["WAR"] + n["RAW"] + n["WAW"], n["WAR"], l0, lx, wp, n["RAW"], n["WAW"]
    if (pairs != "")
        for (k in pair)
            print k ": " pair[k] > pairs
}
