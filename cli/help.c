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
    "  run [-w DUR | -n] [--lease DUR] [-E N] [--on-lost term|ignore] [-v] NAME... -- CMD...\n"
    "                           run CMD while holding lock NAME (several: all of them;\n"
    "                           --fair/--read/--write before a NAME: other kinds)\n"
    "  status [--json] NAME     free or held; holders (host, pid, command), TTL, token, waiters\n"
    "  status --stats [NAME]    ... and this client's statistics; the server's eviction policy\n"
    "  list [--json] [PATTERN]  the locks in Redis (SCAN), Redisson's included\n"
    "  watch [--interval DUR] [PATTERN]\n"
    "                           a live table of locks, until q or Ctrl-C\n"
    "  unlock --force NAME      delete the lock whoever holds it; wake its waiters\n"
    "  help [COMMAND]           this text, or one command's (also: dlock COMMAND --help)\n"
    "\n"
    "Options (before or after the command name):\n"
    "  --url URL                redis://[user[:password]@]host[:port][/db] or\n"
    "                           unix:///path[?db=N] (default: $DLOCK_URL, else\n"
    "                           redis://127.0.0.1:6379)\n"
    "  --password-file FILE     the password is the first line of FILE; else the URL's,\n"
    "                           else $DLOCK_PASSWORD, else $REDISCLI_AUTH. Prefer these\n"
    "                           to a password in --url, which ps(1) can show\n"
    "  --watchdog DUR           lease of a lock held without --lease, renewed every DUR/3\n"
    "                           while dlock runs (default 30s)\n"
    "  --command-timeout DUR    longest wait for one Redis reply (default 3s)\n"
    "  -q, --quiet              no messages on stderr, exit codes only\n"
    "  -h, --help               this text;  --version  the version\n"
    "\n"
    "Durations (every option that takes one): 500ms, 10s, 1m30s, 2h30m, 1d (units d h m\n"
    "s ms, largest first); a bare number is seconds (1.5 = 1500ms); inf or forever for\n"
    "no limit where none makes sense (run --wait, run --lease), refused elsewhere.\n"
    "\n"
    "Exit codes:\n"
    "  0    success (run: CMD's own status; 128+N if CMD died of signal N)\n"
    "  64   usage error                   65  the key exists and is not a lock\n"
    "  66   --password-file unreadable    69  Redis unreachable\n"
    "  70   other failure                 75  lock not acquired in time (run -E)\n"
    "  76   lock lost while CMD ran       77  password or ACL refused\n"
    "  78   bad $DLOCK_URL, or no such database\n"
    "  126, 127  CMD could not be run / was not found\n";

static const char run_text[] =
    "usage: dlock run [OPTIONS] NAME... -- CMD [ARG...]\n"
    "       dlock run [OPTIONS] --name NAME -- CMD [ARG...]\n"
    "       dlock run [OPTIONS] -- NAME -- CMD [ARG...]    (a NAME that begins with '-')\n"
    "\n"
    "Acquires lock NAME, runs CMD while holding it, releases it once CMD is gone.\n"
    "Several names (NAME NAME..., and any of the options below) are taken all or\n"
    "nothing, as one multi-lock, and released together.\n"
    "\n"
    "  -w, --wait, --timeout DUR  give up after DUR (0: try once; inf: no limit, the\n"
    "                           default)\n"
    "  -n, --nonblock           the same as --wait 0\n"
    "  --lease DUR              hold for DUR at most, never renewed (inf: the watchdog,\n"
    "                           the default)\n"
    "  -E, --conflict-exit-code N\n"
    "                           exit code when not acquired in time (default 75)\n"
    "  --on-lost term|ignore    the lock lost while CMD runs: SIGTERM, SIGKILL 10 s\n"
    "                           later, exit 76 (term, the default); or warn only\n"
    "  -v, --verbose            say when the wait starts, who holds the lock and for how\n"
    "                           long, and every 10 s while waiting (on a terminal: one\n"
    "                           updating status line)\n"
    "  --name NAME              a lock's name, even one that begins with '-'\n"
    "  --fair                   the next NAME is a fair lock (Redisson's RFairLock):\n"
    "                           waiters take their turns in arrival order\n"
    "  --read                   the next NAME is the read lock of a read-write lock\n"
    "                           (Redisson's RReadWriteLock): shared with other readers\n"
    "  --write                  the next NAME is its write lock: excludes everybody\n"
    "  and the global options (dlock --help).\n"
    "\n"
    "CMD's environment: DLOCK_NAME (the first name), DLOCK_NAMES (all, one per line),\n"
    "DLOCK_TOKEN (the fencing token: it only grows; empty for several names),\n"
    "DLOCK_OWNER (the owner id). A dlock run inside CMD on a lock that this run (or one\n"
    "around it) holds re-enters it instead of waiting for itself.\n"
    "\n"
    "Signals INT, TERM, HUP and QUIT sent to dlock go on to CMD (the terminal's reach it\n"
    "directly); the lock is released once CMD is gone. If dlock itself dies (kill -9),\n"
    "CMD and every process it started are killed at once. A lock lost while CMD ran\n"
    "means exit 76, also when only the release finds it gone.\n";

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
    "A warning line when the server's maxmemory-policy may evict held locks\n"
    "(allkeys-*, volatile-*).\n"
    "\n"
    "  --stats     this command's own client's statistics (dlock_client_stats):\n"
    "              acquisitions, waits, wake-ups, renewals, lost holds, connections,\n"
    "              round trips, latency histograms; with no NAME, only those.\n"
    "  --json      one JSON object: name, locked, holders [owner, count, host, pid,\n"
    "              addr, command, held_ms, client], ttl_ms (-2 no key, -1 no expiry),\n"
    "              token, waiters. A name (or owner) that is not valid UTF-8 also\n"
    "              comes as name_base64 (owner_base64): its exact bytes. Also\n"
    "              eviction_policy (null when unreadable), eviction_risk, and with\n"
    "              --stats a stats object (histogram buckets as [le_us, count]).\n"
    "  and the global options (dlock --help).\n";

static const char list_text[] =
    "usage: dlock list [--json] [PATTERN]\n"
    "\n"
    "The locks whose names match PATTERN (a Redis glob, default *), found with SCAN,\n"
    "never KEYS; Redisson's own locks included. One line each, sorted by name, with\n"
    "the holders (host:pid when the holder is a dlock client), TTL and token.\n"
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
    "\n"
    "Deletes lock NAME whoever holds it and wakes its waiters (Redisson's\n"
    "forceUnlock); says whether it was held and by whom. A 'dlock run' holding it\n"
    "learns of the loss and exits 76.\n"
    "\n"
    "  --force     required: there is no other kind of unlock\n"
    "  and the global options (dlock --help).\n";

static const char help_text[] =
    "usage: dlock help [COMMAND]\n"
    "\n"
    "The usage of dlock, or of one COMMAND (run, status, list, watch, unlock, help).\n";

int cli_help(FILE *f, const char *cmd)
{
    static const struct {
        const char *name;
        const char *text;
    } texts[] = {{"run", run_text},     {"status", status_text}, {"list", list_text},
                 {"watch", watch_text}, {"unlock", unlock_text}, {"help", help_text}};
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
