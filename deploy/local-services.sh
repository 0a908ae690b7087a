#!/usr/bin/env bash
# Make sure PostgreSQL and Redis answer on 127.0.0.1, starting them when they are installed but down.
# Sourced by tests/run.sh; fails with a clear message when a service is not installed.

_wait_for() {  # _wait_for DESCRIPTION COMMAND...
  local what=$1; shift
  for _ in $(seq 1 60); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  echo "error: $what did not come up within 30 seconds" >&2
  return 1
}

_postgres_up() { pg_isready -h 127.0.0.1 -p 5432 -q; }

_redis_up() {
  # No redis-cli needed: speak the protocol over bash's /dev/tcp.
  exec 3<>/dev/tcp/127.0.0.1/6379 || return 1
  printf 'PING\r\n' >&3
  local reply
  read -r -t 2 reply <&3
  exec 3>&-
  [[ $reply == +PONG* ]]
}

ensure_postgres() {
  if command -v pg_isready >/dev/null && _postgres_up; then return 0; fi
  if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
    echo "starting PostgreSQL" >&2
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start || true
    _wait_for "PostgreSQL on 127.0.0.1:5432" _postgres_up
    return
  fi
  echo "error: PostgreSQL is not answering on 127.0.0.1:5432 and no local cluster is installed to start." >&2
  echo "       Install PostgreSQL (apt-get install postgresql) or point HANGO_TEST_ADMIN_URL at a server." >&2
  return 1
}

ensure_redis() {
  if _redis_up 2>/dev/null; then return 0; fi
  if command -v redis-server >/dev/null; then
    echo "starting Redis" >&2
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/hango.log
    _wait_for "Redis on 127.0.0.1:6379" _redis_up
    return
  fi
  echo "error: Redis is not answering on 127.0.0.1:6379 and redis-server is not installed." >&2
  echo "       Install it (apt-get install redis-server) or point HANGO_TEST_REDIS_URL at a server." >&2
  return 1
}
