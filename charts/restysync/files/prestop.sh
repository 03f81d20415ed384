# preStop of the nginx container: keep serving while the pod's endpoint
# leaves the Service, then drain. Arguments: $1 seconds to keep serving,
# $2 seconds to wait for the drain, $3 nginx's pid file. The chart and the
# kustomize example run it as `sh -c SCRIPT prestop $1 $2 $3`, and so does
# agent/e2e's TestRolloutDropsNothing, against real nginx under load.
#
# SIGQUIT is sent here rather than left to the image's STOPSIGNAL, which
# another image may set to SIGTERM (nginx's fast stop, dropping open
# requests); the pid file names the master whatever PID the shared process
# namespace gave it, and reading it needs no config parse.
sleep "$1"
pid=$(cat "$3") || exit 0
echo "preStop: SIGQUIT to nginx master $pid"
kill -QUIT "$pid" || exit 0
waited=0
while kill -0 "$pid" 2>/dev/null; do
  if [ "$waited" -ge "$2" ]; then
    echo "preStop: nginx master $pid still draining after $2 s"
    exit 1
  fi
  sleep 1
  waited=$((waited + 1))
done
echo "preStop: nginx master $pid drained and exited"
