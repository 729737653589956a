# rutomq: erasing the package stops the agent first (not an upgrade).
if [ "$1" -eq 0 ] && [ -d /run/systemd/system ]; then
    systemctl stop rutomq.service >/dev/null 2>&1 || :
fi
