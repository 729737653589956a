#!/usr/bin/env bash
# What the authorizer costs (the command the recorded results name):
#   benches/authorizer.sh [ROUNDS] [DURATION_S]
# is benches/control-plane.sh authorizer [ROUNDS] [DURATION_S].
exec "$(dirname "${BASH_SOURCE[0]}")/control-plane.sh" authorizer "$@"
