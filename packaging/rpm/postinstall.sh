# rutomq: the state directory and the environment file's group. Nothing is
# enabled or started; an upgrade restarts an agent that was running.
install -d -o rutomq -g rutomq -m 0750 /var/lib/rutomq
if [ "$1" -eq 1 ]; then
    chown root:rutomq /etc/rutomq
    chmod 0750 /etc/rutomq
fi
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
    if [ "$1" -gt 1 ]; then
        systemctl try-restart rutomq.service >/dev/null 2>&1 || :
    fi
fi
