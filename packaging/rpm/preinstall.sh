# rutomq: the system user, before the files it owns are installed.
if ! getent passwd rutomq >/dev/null; then
    useradd --system --user-group --home-dir /var/lib/rutomq --no-create-home \
        --shell /sbin/nologin --comment "rutomq agent" rutomq
fi
