# What tests/*/build.sh share, sourced after setting $tests (the tests
# directory) and $prog (the name errors are reported under): one build at a
# time, content stamps that make a rebuild of unchanged sources a no-op, and
# quiet Maven packaging whose log is shown only when it fails.

# One build at a time: parallel test workers may all call the build scripts,
# and their Maven runs share one local repository.
build_lock() {
    mkdir -p "$tests/.cache/bin"
    exec 9>"$tests/.cache/.build.lock"
    flock 9
}

require() {  # require COMMAND
    command -v "$1" >/dev/null || { echo "$prog: $1 not found" >&2; exit 1; }
}

stamp_of() {  # stamp_of EXTRA FILE... -> hash of the files' contents plus EXTRA
    local extra="$1"; shift
    { echo "$extra"; cat "$@"; } | sha256sum | cut -d' ' -f1
}

fresh() {  # fresh OUT STAMP: OUT exists and was built from STAMP
    [[ -e "$1" && -f "$1.stamp" && "$(cat "$1.stamp")" == "$2" ]]
}

maven_package() {  # maven_package WHAT POM LOG [MAVEN ARGUMENT]...
    local what="$1" pom="$2" log="$3"; shift 3
    if ! mvn -B -q -Dstyle.color=never -f "$pom" package "$@" >"$log" 2>&1; then
        cat "$log" >&2
        echo "$prog: mvn package for $what failed" >&2
        exit 1
    fi
}

install_built() {  # install_built FROM OUT STAMP: OUT (a file or a directory) becomes FROM's copy
    local from="$1" out="$2" stamp="$3"
    if [[ -d "$from" ]]; then
        rm -rf "$out"
        cp -r "$from" "$out"
    else
        cp "$from" "$out.tmp"
        mv "$out.tmp" "$out"
    fi
    echo "$stamp" >"$out.stamp"
}
