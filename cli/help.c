/* Usage texts: the whole command's (dlock --help) and each subcommand's
 * (dlock run --help, dlock help run). The man page says the same at length. */
#include <string.h>

#include "cli.h"

static const char global_text[] =
    "usage: dlock [OPTIONS] COMMAND [ARGS...]\n"
    "\n"
    "Runs a command under a distributed lock held in Redis (Redisson's RLock layout),\n"
    "and shows who holds which lock.\n"
    "\n"
    "Commands:\n"
    "  run [-w DUR | -n] [--lease DUR | --max-hold DUR] [--lock-delay DUR] [-E N]\n"
    "      [--on-lost term|ignore] [-v]\n"
    "      [--kill-after DUR] [--kill-orphans] [--lost-exit-code N] NAME... -- CMD...\n"
    "                           run CMD while holding lock NAME (several: all of them;\n"
    "                           --fair/--read/--write/--spin before a NAME: other\n"
    "                           kinds), until CMD and every process it started are gone\n"
    "  run --semaphore NAME --permits N [-w DUR | -n] ... -- CMD...\n"
    "                           run CMD while at most N such commands run anywhere\n"
    "  run --rate N/DUR [-w DUR | -n] NAME -- CMD...\n"
    "                           start CMD at most N times per DUR anywhere\n"
    "  run --stripes N [--fair|--read|--write|--spin] NAME KEY -- CMD...\n"
    "                           run CMD holding the lock of KEY's stripe NAME:segment:S\n"
    "                           (S = KEY % N for an integer KEY, else crc32(KEY) % N)\n"
    "  status [--json] NAME     free or held; holders (host, pid, command), TTL, token, waiters;\n"
    "                           a semaphore's permits or a latch's count\n"
    "  list [--json] [PATTERN]  the locks, semaphores and latches in Redis (SCAN), Redisson's\n"
    "                           included\n"
    "  status --stats [NAME]    ... and this client's statistics; the server's eviction policy\n"
    "  watch [--interval DUR] [PATTERN]\n"
    "                           a live table of locks, until q or Ctrl-C\n"
    "  unlock --force [--permit ID] NAME\n"
    "                           free NAME whoever holds it, whatever kind of lock it is\n"
    "                           (a permit semaphore's permit ID); wake its waiters\n"
    "  latch set NAME N | latch down NAME | latch wait [-w DUR] [--must-exist] NAME\n"
    "                           a count-down latch: set its count, count down, wait for 0\n"
    "  fence [--token N] COMMAND KEY [ARG...]\n"
    "                           a write to KEY only if the token ($DLOCK_TOKEN) is not\n"
    "                           lower than the highest KEY's guard has seen (else 79)\n"
    "  elect [RUN OPTIONS] NAME -- CMD...\n"
    "                           run CMD while this process leads election NAME\n"
    "                           ($DLOCK_TERM); 76 when leadership is lost\n"
    "  leader [--watch] NAME    who leads NAME (term, host, pid), and each change\n"
    "  check [--held-over DUR] [--waiters-over N] [--queue-over N] [PATTERN]\n"
    "                           the locks, semaphores and latches past a threshold, with\n"
    "                           their holders: exit 0 none, 1 some (cron, Nagios)\n"
    "  exporter --listen ADDR:PORT [--interval DUR] [--max-keys N] [--max-holders N]\n"
    "      [PATTERN]\n"
    "                           the state of the locks for Prometheus (/metrics)\n"
    "  doctor [--name NAME] [--replicas N] [URL]\n"
    "                           what makes locks unsafe on the deployment, each with its\n"
    "                           fix: exit 0 healthy, 1 warnings, 2 unsafe\n"
    "  help [COMMAND]           this text, or one command's (also: dlock COMMAND --help)\n"
    "\n"
    "Options (before or after the command name):\n"
    "  --url URL                redis://[user[:password]@]host[:port][/db] or\n"
    "                           unix:///path[?db=N] or\n"
    "                           redis-sentinel://host[:port][,host...][/db]#MASTER or\n"
    "                           redis-cluster://host[:port][,host...] or\n"
    "                           redis-replicated://host[:port][,host...][/db]; rediss://,\n"
    "                           rediss-sentinel://, rediss-cluster://,\n"
    "                           rediss-replicated:// over TLS, with\n"
    "                           ?cacert=FILE&cert=FILE&key=FILE&sni=NAME after the hosts\n"
    "                           (default: $DLOCK_URL, else redis://127.0.0.1:6379)\n"
    "  --password-file FILE     the password is the first line of FILE; else the URL's,\n"
    "                           else $DLOCK_PASSWORD, else $REDISCLI_AUTH. Prefer these\n"
    "                           to a password in --url, which ps(1) can show (a FILE\n"
    "                           others may read: a warning)\n"
    "  --prefix PREFIX          the names' prefix (else $DLOCK_PREFIX): list, watch, check\n"
    "                           and exporter without a PATTERN take PREFIX*\n"
    "  --map HOST:PORT=HOST:PORT[,...]  reach a node that a sentinel or the cluster\n"
    "                           announces at the first address at the second (NAT,\n"
    "                           containers); the URL's ?map= syntax; repeatable\n"
    "  --password-command CMD   run CMD (sh -c) at every connect and reconnect; the first\n"
    "                           line of its output is the password (a token that\n"
    "                           expires); it fails or prints nothing: exit 77\n"
    "  --watchdog DUR           lease of a lock held without --lease, renewed every DUR/3\n"
    "                           while dlock runs (default 30s)\n"
    "  --failover-quarantine off|auto|DUR  after a failover (a new primary seen),\n"
    "                           acquisitions on it wait DUR, or auto: the longest lease\n"
    "                           an earlier holder may still believe it has (--watchdog,\n"
    "                           or the longest --lease); off: the default\n"
    "  --command-timeout DUR    longest wait for one Redis reply (default 3s)\n"
    "  --connect-timeout DUR    longest wait to connect to Redis and for its first answers\n"
    "                           (default 10s); a wait given with -w bounds it too (1s\n"
    "                           at least)\n"
    "  -q, --quiet              no messages on stderr, exit codes only\n"
    "  -h, --help               this text;  --version  the version\n"
    "\n"
    "Durations (every option that takes one): 500ms, 10s, 1m30s, 2h30m, 1d (units d h m\n"
    "s ms, largest first); a bare number is seconds (1.5 = 1500ms); inf or forever for\n"
    "no limit where none makes sense (run --wait, run --lease), refused elsewhere.\n"
    "\n"
    "Exit codes:\n"
    "  0    success (run: CMD's own status; 128+N if CMD died of signal N)\n"
    "  1    check: something is past a threshold; doctor: warnings\n"
    "  2    doctor: unsafe (an eviction policy that drops held locks)\n"
    "  64   usage error                   65  the key exists and is not a lock\n"
    "  66   --password-file unreadable; latch wait --must-exist: no such latch\n"
    "  69   Redis unreachable\n"
    "  70   other failure (an unexpected answer such as MOVED: use redis-cluster://)\n"
    "  71   exporter: cannot listen on --listen's address (in use, not this host's)\n"
    "  75   lock not acquired in time (run -E)\n"
    "  76   lock lost while CMD (or what it started) ran; also with --on-lost ignore\n"
    "  77   password or ACL refused       78  bad $DLOCK_URL, or no such database\n"
    "  79   fence: refused, a newer token has written\n"
    "  80   TLS failed (certificate not trusted, wrong name, expired; TLS files)\n"
    "  126, 127  CMD could not be run / was not found\n";

static const char run_text[] =
    "usage: dlock run [OPTIONS] NAME... -- CMD [ARG...]\n"
    "       dlock run [OPTIONS] --semaphore NAME --permits N -- CMD [ARG...]\n"
    "       dlock run [OPTIONS] --name NAME -- CMD [ARG...]\n"
    "       dlock run [OPTIONS] -- NAME -- CMD [ARG...]    (a NAME that begins with '-')\n"
    "\n"
    "Acquires lock NAME, runs CMD while holding it, releases it once CMD and every\n"
    "process CMD started are gone (background jobs, setsid and double-forked ones).\n"
    "Several names (NAME NAME..., and any of the options below) are taken all or\n"
    "nothing, as one multi-lock, and released together.\n"
    "\n"
    "  -w, --wait, --timeout DUR  give up after DUR (0: try once; inf: no limit, the\n"
    "                           default)\n"
    "  -n, --nonblock           the same as --wait 0\n"
    "  --lease DUR              hold for DUR at most, never renewed (inf: the watchdog,\n"
    "                           the default)\n"
    "  --max-hold DUR           the longest the lock stays held with the watchdog: then\n"
    "                           renewals stop, Redis lets it go, and CMD is ended as for\n"
    "                           any loss (exit 76). Not with --lease (inf: no limit, the\n"
    "                           default)\n"
    "  --lock-delay DUR         after the lock ends without a release (deleted, forced\n"
    "                           open, evicted; this process stopped or cut off past its\n"
    "                           lease), nobody else may take it for DUR more: every dlock\n"
    "                           acquirer honours it, whatever its own options. By default\n"
    "                           --kill-after + 2s, so a lost lock stays shut while CMD's\n"
    "                           tree is being ended; once every process of it is gone the\n"
    "                           delay is cleared and the lock reopens at once (a normal\n"
    "                           end releases it at once too). DUR longer: a floor; 0: no\n"
    "                           delay. Up to 1d. Redisson clients do not honour it; with\n"
    "                           --read a reader's loss delays writers only; with\n"
    "                           --semaphore a permit lost unreleased stays out\n"
    "  -E, --conflict-exit-code N\n"
    "                           exit code when not acquired in time (default 75)\n"
    "  --on-lost term|ignore    the lock lost while CMD (or what it started) runs:\n"
    "                           SIGTERM to all of them, SIGKILL --kill-after later, exit\n"
    "                           76 once none is left (term, the default); or warn only\n"
    "                           and exit 76 at the end all the same\n"
    "  --kill-after DUR         between SIGTERM and SIGKILL (default 10s; 0: at once)\n"
    "  --kill-orphans           end what CMD leaves running when it exits (SIGTERM, then\n"
    "                           SIGKILL) instead of holding the lock until it ends\n"
    "  --lost-exit-code N|command\n"
    "                           exit code when the lock was lost (default 76); command:\n"
    "                           CMD's own status\n"
    "  --keep-env-secrets       pass DLOCK_PASSWORD, REDISCLI_AUTH and DLOCK_URL's\n"
    "                           password on to CMD (removed from its environment else)\n"
    "  -v, --verbose            say when the wait starts, who holds the lock and for how\n"
    "                           long, and every 10 s while waiting (on a terminal: one\n"
    "                           updating status line); what CMD left running\n"
    "  --name NAME              a lock's name, even one that begins with '-'\n"
    "  --fair                   the next NAME is a fair lock (Redisson's RFairLock):\n"
    "                           waiters take their turns in arrival order\n"
    "  --read                   the next NAME is the read lock of a read-write lock\n"
    "                           (Redisson's RReadWriteLock): shared with other readers\n"
    "  --write                  the next NAME is its write lock: excludes everybody\n"
    "  --spin                   the next NAME is a spin lock (Redisson's RSpinLock): the\n"
    "                           lock's layout, but the wait subscribes to nothing and\n"
    "                           tries again on a back-off of 1 ms doubling to 128 ms\n"
    "                           (one NAME only)\n"
    "  --stripes N              NAME KEY name one lock: KEY's stripe of N, NAME:segment:S,\n"
    "                           S = KEY % N for an integer KEY (a '-' and digits; the sign\n"
    "                           kept, as Java's %: -3 is segment -3; 007 is 7), else\n"
    "                           crc32(KEY) % N (java.util.zip.CRC32's): the lock a Java\n"
    "                           service taking NAME + \":segment:\" + (id % N) takes. N: 1 to\n"
    "                           1048576. --fair, --read, --write go before NAME\n"
    "  --semaphore NAME --permits N\n"
    "                           instead of locks, one permit of semaphore NAME (Redisson's\n"
    "                           RPermitExpirableSemaphore) of N in all: at most N such\n"
    "                           commands run at once. An absent semaphore is created with\n"
    "                           N permits; one with another total is refused (exit 65).\n"
    "                           The permit is renewed by the watchdog: a runner killed\n"
    "                           with -9 gives it back within the --watchdog timeout.\n"
    "                           CMD gets DLOCK_PERMIT (the permit's id). No --lease.\n"
    "  --rate N/DUR NAME        instead of a lock, one permit of rate limiter NAME\n"
    "                           (Redisson's RRateLimiter): at most N starts per DUR across\n"
    "                           every machine; waits for the window (-w, -n: exit 75).\n"
    "                           An absent limiter is set to N/DUR; one with another rate\n"
    "                           is refused (exit 65). Nothing is held while CMD runs:\n"
    "                           dlock becomes CMD (exec). No --lease.\n"
    "  and the global options (dlock --help).\n"
    "\n"
    "CMD's environment: DLOCK_NAME (the first name), DLOCK_NAMES (all, one per line),\n"
    "DLOCK_TOKEN (the fencing token: it only grows; empty for several names),\n"
    "DLOCK_OWNER (the owner id). A dlock run inside CMD on a lock that this run (or one\n"
    "around it) holds re-enters it instead of waiting for itself. Not Redis's\n"
    "credentials: DLOCK_PASSWORD and REDISCLI_AUTH are removed, DLOCK_URL loses its\n"
    "password (--keep-env-secrets keeps them). CMD is written beside the lock for\n"
    "dlock status (a note its readers read); CLIENT LIST, which other users of the\n"
    "server may read, shows this host, pid and since when, never CMD.\n"
    "\n"
    "CMD runs under a guard process (dlock-guard in ps, named dlk-guard so that\n"
    "`pkill dlock` leaves it to end the tree), the subreaper of everything\n"
    "CMD starts. Signals INT, TERM, HUP and QUIT sent to dlock go on to every one of\n"
    "them (SIGKILL --kill-after later); the terminal's reach CMD directly. The lock is\n"
    "held until the last of them is gone. If CMD exits and leaves processes running,\n"
    "the lock stays held until they end (as flock's), or --kill-orphans ends them. If\n"
    "dlock itself dies (kill -9), the guard kills them all at once; if the guard dies,\n"
    "dlock does. Not covered: both killed at once (pkill -9 dlock matches both; pkill\n"
    "-x dlock only dlock): CMD dies with its guard, what it started runs on. A lock\n"
    "lost while they ran means exit 76, also when only the release finds it gone.\n";

static const char status_text[] =
    "usage: dlock status [--json] [--stats] NAME\n"
    "       dlock status [--json] [--stats] --name NAME | -- NAME\n"
    "       dlock status [--json] --stats\n"
    "\n"
    "Whether lock NAME is free or held; each holder with its hold count and, for\n"
    "dlock clients, its host, pid, address, command and how long it has held the\n"
    "lock (a holder no dlock connection names shows as Redisson or other); the TTL,\n"
    "the last fencing token and the number of waiters. Control characters in names\n"
    "are shown escaped (\\n, \\x1b, \\\\).\n"
    "A permit-expirable semaphore shows its permits: available, held, and each held\n"
    "permit's id with the lease it has left, and who holds it (a dlock run: host,\n"
    "pid, command, since when). A plain count (a count-down latch's, or a\n"
    "semaphore's permits: Redis stores them alike) shows the count, its semaphore\n"
    "waiters and its latch awaiters (subscribers of each channel).\n"
    "A warning line when the server's maxmemory-policy may evict held locks\n"
    "(allkeys-*, volatile-*).\n"
    "\n"
    "  --stats     this command's own client's statistics (dlock_client_stats):\n"
    "              acquisitions, waits, wake-ups, renewals, lost holds, connections,\n"
    "              round trips, latency histograms; with no NAME, only those.\n"
    "  --json      one JSON object: name, locked, holders [owner, count, host, pid,\n"
    "              addr, command, held_ms, client], ttl_ms (-2 no key, -1 no expiry),\n"
    "              token, kind (lock, fair lock: one with a queue (with nobody\n"
    "              queued a fair lock is a lock), read-write lock, none), waiters.\n"
    "              A name (or owner) that is not valid UTF-8 also\n"
    "              comes as name_base64 (owner_base64): its exact bytes. A semaphore or\n"
    "              latch: name, kind (permit semaphore | count), count, holders\n"
    "              [permit, ttl_ms] (a permit semaphore's), ttl_ms, waiters and, for a\n"
    "              count, latch_waiters. Also eviction_policy (null when\n"
    "              unreadable), eviction_risk, and with --stats a stats object\n"
    "              (histogram buckets as [le_us, count]).\n"
    "  and the global options (dlock --help).\n";

static const char list_text[] =
    "usage: dlock list [--json] [PATTERN]\n"
    "\n"
    "The locks whose names match PATTERN (a Redis glob, default *), found with SCAN,\n"
    "never KEYS; Redisson's own locks included. One line each, sorted by name, with\n"
    "the holders (host:pid when the holder is a dlock client), TTL and token. Then the\n"
    "semaphores and latches: string keys holding a whole number, with the permits\n"
    "held of a permit-expirable semaphore (the family's own counters, such as\n"
    "fencing tokens and fence guards dlock_fence:*, are left out unless PATTERN\n"
    "names them; other whole numbers an application keeps show up too, as\n"
    "semaphore/latch: give a PATTERN to narrow it).\n"
    "\n"
    "  --json      an array of objects as 'dlock status --json' gives, without waiters\n"
    "  and the global options (dlock --help).\n";

static const char watch_text[] =
    "usage: dlock watch [--interval DUR] [PATTERN]\n"
    "\n"
    "The locks matching PATTERN (default *) as a table with holders, TTL, token and\n"
    "waiters, refreshed every DUR (default 1s, at least 50ms) until q or Ctrl-C. When\n"
    "Redis cannot be reached the header says so at once and the last good table stays,\n"
    "greyed, until it answers again.\n"
    "\n"
    "  --interval DUR   refresh period\n"
    "  and the global options (dlock --help).\n";

static const char unlock_text[] =
    "usage: dlock unlock --force NAME\n"
    "       dlock unlock --force --name NAME | -- NAME\n"
    "       dlock unlock --force --permit ID NAME\n"
    "\n"
    "Frees NAME whoever holds it, whatever kind of lock it is, and wakes its waiters;\n"
    "says whether it was held and by whom. A lock is deleted (Redisson's forceUnlock);\n"
    "a fair lock too, and the first in its queue woken; a read-write lock in the mode\n"
    "it is held in; a permit semaphore's permit ID given back. A 'dlock run' holding\n"
    "it learns of the loss and exits 76. A count (a semaphore's or a latch's) belongs\n"
    "to nobody (65); so does a key of another type, left as it is.\n"
    "\n"
    "  --force       required: there is no other kind of unlock\n"
    "  --permit ID   the permit to free (32 hex characters: 'dlock status NAME')\n"
    "  and the global options (dlock --help).\n";

static const char fence_text[] =
    "usage: dlock fence [--token N] COMMAND KEY [ARG...]\n"
    "       dlock fence --guard KEY\n"
    "\n"
    "Runs the write COMMAND on KEY only when the fencing token is not lower than the\n"
    "highest token KEY's guard has seen, and raises the guard to it, atomically: a\n"
    "holder that lost its lock and writes late is refused once a newer holder wrote.\n"
    "Prints the command's reply (nothing for nil); a refusal exits 79.\n"
    "\n"
    "  -t, --token N    the token (default: $DLOCK_TOKEN, which 'dlock run' sets)\n"
    "  --guard KEY      print the highest token KEY's guard has seen (0: none)\n"
    "  and the global options (dlock --help).\n"
    "\n"
    "Commands: SET SETEX PSETEX SETNX GETDEL APPEND SETRANGE INCR INCRBY INCRBYFLOAT\n"
    "DECR DECRBY DEL UNLINK EXPIRE PEXPIRE PERSIST HSET HSETNX HDEL HINCRBY\n"
    "HINCRBYFLOAT LPUSH RPUSH LPOP RPOP LSET LTRIM SADD SREM ZADD ZREM ZINCRBY XADD\n"
    "XDEL XTRIM, on one key. The guard is the key dlock_fence:{KEY} (dlock_fence:KEY\n"
    "when KEY has a hash tag); it lives as long as KEY, and 7 days after it is gone.\n"
    "\n"
    "  dlock run jobs:nightly -- sh -c 'dlock fence INCRBY stats:runs 1 &&\n"
    "                                   dlock fence SET report:last \"$(date)\"'\n";

static const char elect_text[] =
    "usage: dlock elect [-w DUR|-n] [-E N] [--max-hold DUR] [--on-lost term|ignore] [-v]\n"
    "                   NAME -- CMD [ARG...]\n"
    "\n"
    "Campaigns for leadership of election NAME (waiting as 'run' waits for a lock), runs\n"
    "CMD while this process leads, and resigns when CMD ends. Leading is holding the lock\n"
    "NAME, renewed by the watchdog; the term is its fencing token (terms only grow), given\n"
    "to CMD as $DLOCK_TERM (and $DLOCK_TOKEN, for 'dlock fence'). Observers ('dlock\n"
    "leader --watch') are told of each new leader and of each resignation. If leadership\n"
    "is lost (the lock deleted or forced open, Redis unreachable, --max-hold), CMD is\n"
    "stopped as 'run' stops it and dlock exits 76. Options and exit codes as 'run', but\n"
    "--fair, --read, --write, --stripes, --semaphore and --lease do not apply to an\n"
    "election: each is a usage error (exit 64). A lost leader's lock-delay (--lock-delay,\n"
    "as 'run') keeps other campaigns out until its command's tree is gone.\n";

static const char leader_text[] =
    "usage: dlock leader [--watch] NAME\n"
    "\n"
    "Prints who leads election NAME: 'NAME: term T, HOST PID OWNER', or 'NAME: no leader'.\n"
    "With --watch (-w), prints a line at each change (a new leader, a resignation, a\n"
    "leader whose lock ended), woken by the election's messages, until SIGINT, SIGTERM\n"
    "or SIGHUP (also when started with them ignored, as a script's background job),\n"
    "then exit 0.\n";

#define LATCH_SET_TEXT                                                                     \
    "usage: dlock latch set NAME N\n"                                                     \
    "\n"                                                                                  \
    "Sets latch NAME's count to N (1..2147483647) when the latch is at zero, i.e. when\n" \
    "it does not exist (Redisson's trySetCount). A latch still counting is left as it\n"  \
    "is: exit 75, the message gives its count. N = 0, negative or not a number: exit\n"  \
    "64; a key that is not a latch: exit 65, left as it is.\n"
#define LATCH_DOWN_TEXT                                                                    \
    "usage: dlock latch down NAME\n"                                                      \
    "\n"                                                                                  \
    "Counts latch NAME down by one (Redisson's countDown). At zero its key is deleted\n"  \
    "and every awaiter, in every process (Redisson's too), wakes. A latch at zero\n"      \
    "already stays there (exit 0).\n"
#define LATCH_WAIT_TEXT                                                                    \
    "usage: dlock latch wait [-w DUR] [--must-exist] NAME\n"                              \
    "\n"                                                                                  \
    "Waits until latch NAME is at zero (Redisson's await): exit 0 then (at once when\n"   \
    "it is at zero, or does not exist), 75 when DUR passes first (the message gives the\n" \
    "count). Waiting sleeps on the latch's channel: nothing is sent to Redis meanwhile.\n" \
    "\n"                                                                                  \
    "  -w, --wait, --timeout DUR  give up after DUR (0: check once; inf: no limit, the\n" \
    "                           default)\n"                                                \
    "  --must-exist             exit 66 when NAME does not exist, not 0: a mistyped\n"   \
    "                           name is caught (a latch counted down to zero is\n"       \
    "                           deleted: it does not exist either)\n"

static const char latch_text[] =
    "usage: dlock latch set NAME N | down NAME | wait [-w DUR] [--must-exist] NAME\n"
    "\n"
    "A count-down latch (Redisson's RCountDownLatch; key NAME holds the count, absent\n"
    "at zero): one process sets the count, others count down, and whoever needs them\n"
    "all done waits for zero. 'dlock latch SUBCOMMAND --help' for each.\n"
    "\n" LATCH_SET_TEXT "\n" LATCH_DOWN_TEXT "\n" LATCH_WAIT_TEXT
    "\n"
    "NAME may also be given as --name NAME, or after --. And the global options\n"
    "(dlock --help).\n";

static const char check_text[] =
    "usage: dlock check [--held-over DUR] [--waiters-over N] [--queue-over N] [PATTERN]\n"
    "\n"
    "One pass over the locks, semaphores and latches whose names match PATTERN (a\n"
    "Redis glob, default *; SCAN, never KEYS). Prints a summary line, then each one\n"
    "past a threshold with its holders: a dlock run's host, pid, command and since\n"
    "when; for another holder (Redisson's, a program using the library) what is\n"
    "known: its TTL; its hold age and whether it is renewed cannot be told from one\n"
    "look (dlock exporter tells them). Exit 0 when none is past, 1 when some are\n"
    "(cron, Nagios), 64 and the other codes of dlock --help on errors.\n"
    "\n"
    "  --held-over DUR    a hold older than DUR (only holders whose age is known:\n"
    "                     dlock runs; the others are counted in a note)\n"
    "  --waiters-over N   more than N waiting (a latch: awaiting it)\n"
    "  --queue-over N     more than N in a fair lock's queue\n"
    "  -q                 print nothing when nothing is past\n"
    "  and the global options (dlock --help). At least one threshold.\n";

static const char doctor_text[] =
    "usage: dlock doctor [--name NAME] [--replicas N] [URL]\n"
    "\n"
    "One pass over the deployment (URL, else --url / $DLOCK_URL: each primary) for\n"
    "what makes locks unsafe, each finding with its fix; nothing is written:\n"
    "  eviction     a maxmemory-policy other than noeviction (volatile-* evict locks\n"
    "               too: they carry TTLs)\n"
    "  persistence  no append-only file and no replica: a restart forgets the locks\n"
    "  wait         WAIT refused (a warning with --replicas, else a note)\n"
    "  replicas     fewer replicas than --replicas, min-replicas-to-write 0\n"
    "  clock        the server's clock (TIME) apart from this host's by more than\n"
    "               the drift allowance (1% of the watchdog timeout + 2 ms)\n"
    "  acl          commands a lock needs that the user may not run (ACL DRYRUN;\n"
    "               with --name, for that name's keys and channels too)\n"
    "  keys         keys under the family's prefixes (redisson_lock_token:,\n"
    "               redisson_lock_queue:, dlock_lock_next:, ...) of another type\n"
    "A check the ACL refuses (INFO, CONFIG GET, ACL WHOAMI/DRYRUN...) is a warning\n"
    "naming what the user lacks: run doctor as an administrator.\n"
    "Exit 0 healthy (notes only), 1 warnings, 2 unsafe (held locks can be evicted),\n"
    "64 and the other codes of dlock --help when it cannot ask.\n"
    "\n"
    "  --name NAME     a lock name of the application, for the ACL's key checks\n"
    "  --replicas N    replica acknowledgement (WAIT for N replicas) is wanted\n"
    "  and the global options (dlock --help).\n";

static const char exporter_text[] =
    "usage: dlock exporter --listen ADDR:PORT [--interval DUR] [--scrape-timeout DUR]\n"
    "                      [--max-keys N] [--max-holders N] [PATTERN]\n"
    "\n"
    "Serves the state of the locks, semaphores and latches matching PATTERN (default\n"
    "*) at http://ADDR:PORT/metrics in Prometheus' text format: held or free,\n"
    "holders, hold age (dlock runs), how long it has seen each hold, TTL, renewed,\n"
    "waiters, fair queue length, read/write mode, permits available and held, counts\n"
    "and latch awaiters; and the pass's own cost (duration, round trips, objects).\n"
    "A scrape starts a pass only when the last began --interval ago or more; others\n"
    "get the last one from memory. dlock_up 0 and dlock_error_info when a pass fails\n"
    "or does not end within the scrape timeout. Series: one per name and metric, at\n"
    "most --max-keys names (narrow them with PATTERN). Clients are served at once (a\n"
    "request within 2 s, its answer read within 10 s; HTTP/1.x, GET and HEAD). Runs\n"
    "until SIGINT or SIGTERM (exit within a second).\n"
    "\n"
    "  -l, --listen ADDR:PORT   127.0.0.1:9464, [::1]:9464, or :9464 (every address, IPv4\n"
    "                           and IPv6; not loopback: a warning, as anyone reaching it\n"
    "                           reads the names of the locks)\n"
    "  --interval DUR           least time between passes (default 15s)\n"
    "  --scrape-timeout DUR     longest a scrape waits for a pass (default 5s; less when\n"
    "                           Prometheus' X-Prometheus-Scrape-Timeout-Seconds says less)\n"
    "  --max-keys N             most objects a pass looks at (default 10000)\n"
    "  --max-holders N          most holders a pass reads of one (default 10000; the\n"
    "                           rest are counted, not read)\n"
    "  and the global options (dlock --help). Exit 71 when ADDR:PORT cannot be had.\n";

static const char help_text[] =
    "usage: dlock help [COMMAND]\n"
    "\n"
    "The usage of dlock, or of one COMMAND (run, status, list, watch, unlock, latch,\n"
    "fence, elect, leader, check, exporter, help; latch set, latch down, latch wait).\n";

int cli_help(FILE *f, const char *cmd)
{
    static const struct {
        const char *name;
        const char *text;
    } texts[] = {{"run", run_text},     {"status", status_text}, {"list", list_text},
                 {"watch", watch_text}, {"unlock", unlock_text}, {"help", help_text},
                 {"fence", fence_text}, {"elect", elect_text}, {"leader", leader_text},
                 {"check", check_text}, {"exporter", exporter_text}, {"doctor", doctor_text},
                 {"latch", latch_text}, {"latch set", LATCH_SET_TEXT "  and the global options (dlock --help).\n"},
                 {"latch down", LATCH_DOWN_TEXT "  and the global options (dlock --help).\n"},
                 {"latch wait", LATCH_WAIT_TEXT "  and the global options (dlock --help).\n"}};
    if (!cmd) {
        fputs(global_text, f);
        return 0;
    }
    for (size_t k = 0; k < sizeof(texts) / sizeof(texts[0]); k++) {
        if (strcmp(cmd, texts[k].name) == 0) {
            fputs(texts[k].text, f);
            return 0;
        }
    }
    return -1;
}
