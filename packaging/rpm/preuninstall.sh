# rutomq: erasing the package (not an upgrade) stops and disables the agent.
if [ "$1" -eq 0 ]; then
    systemctl --no-reload disable rutomq.service >/dev/null 2>&1 || :
    if [ -d /run/systemd/system ]; then
        systemctl stop rutomq.service >/dev/null 2>&1 || :
    fi
fi
