# rutomq: rpm keeps a changed /etc/rutomq/rutomq.env as .rpmsave and leaves
# /var/lib/rutomq and the rutomq user in place.
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
