# Filter for pip's stderr: drops its "WARNING: Location '…' is ignored" lines, which come from pip's own
# configuration (find-links or file:// indexes that name folders this machine does not have: pip warns once
# per package it looks up, 60 and more for vLLM's environment), and says once at the end which locations
# they were. Every other line passes through as it comes, errors included.
#   cmd 2>&1 1>&3 3>&- | awk -v prefix=NAME -f scripts/pip_quiet.awk >&2
/^WARNING: Location '[^']*' is ignored: / {
    loc = $0
    sub(/^WARNING: Location '/, "", loc)
    sub(/' is ignored: .*$/, "", loc)
    if ($0 ~ /neither a file nor a directory/) sub(/[^\/]+\/$/, "", loc)  # an index's page of one package
    if (!(loc in seen)) { seen[loc] = 1; order[++n] = loc }
    hidden++
    next
}
{ print; fflush() }
END {
    if (n) {
        printf "%s: pip skipped %d package location(s) of its configuration that do not exist here (%d warnings not shown):", prefix ? prefix : "pip", n, hidden
        for (i = 1; i <= n; i++) printf " %s", order[i]
        printf "\n"
    }
}
