#!/bin/sh
# hero-every SECONDS COMMAND [ARG...]
#
# Runs COMMAND, waits SECONDS, runs it again, until SIGTERM or SIGINT. The
# compose stack's pipeline service uses it to refresh the Spark report
# periodically. A failed run is logged and the loop goes on (the next run may
# succeed: nothing archived yet, Spark restarting). Each run ends with one
# JSON line on stderr, like the gateway's own logs. A signal is passed on to a
# running COMMAND; the loop then exits once COMMAND has.
set -u

if [ $# -lt 2 ]; then
  echo "usage: hero-every SECONDS COMMAND [ARG...]" >&2
  exit 2
fi
interval=$1
shift
case $interval in
  '' | *[!0-9.]* | *.*.*)
    echo "hero-every: SECONDS must be a number, got '$interval'" >&2
    exit 2
    ;;
esac

child=
stopping=0
# shellcheck disable=SC2317  # called by the trap
on_signal() {
  stopping=1
  if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null; fi
}
trap on_signal TERM INT

command_text=$(printf '%s' "$*" | sed 's/\\/\\\\/g; s/"/\\"/g')
log() { # LEVEL MESSAGE EXIT SECONDS
  printf '{"ts":"%s","level":"%s","logger":"hero-every","msg":"%s","command":"%s","exit":%s,"seconds":%s}\n' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$1" "$2" "$command_text" "$3" "$4" >&2
}

while [ "$stopping" = 0 ]; do
  started=$(date +%s)
  "$@" &
  child=$!
  wait "$child"
  status=$?
  if [ "$stopping" = 1 ]; then
    # wait was interrupted by the signal: wait for COMMAND itself to finish
    wait "$child" 2>/dev/null
    status=$?
  fi
  child=
  took=$(($(date +%s) - started))
  if [ "$status" = 0 ]; then
    log info "run finished" "$status" "$took"
  else
    log warning "run failed; next try after the interval" "$status" "$took"
  fi
  [ "$stopping" = 1 ] && break
  sleep "$interval" &
  child=$!
  wait "$child"
  child=
done
exit 0
