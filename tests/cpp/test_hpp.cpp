// include/dlock/dlock.hpp on a real Redis, as a C++ user meets it: the
// standard guards on dlock's mutexes between threads and between clients,
// timed tries that time out while the lock is held elsewhere, the errors'
// statuses (thrown and as std::error_code), the semaphore's counting, the
// latch, the permit semaphore, explicit owners and moves; cancellation
// tokens (and std::stop_token under C++20), multi_lock and red_lock,
// election, the asynchronous calls.
//
//   test_hpp REDIS_URL [SLACK]
//
// SLACK (default 1) scales the upper timing bounds, as th_slack() does for
// the C tests (run_cpp.sh computes it the same way). Prints one line per
// failed check and exits 1 when any failed.
#include <dlock/dlock.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <optional>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

int failures = 0;
int checks = 0;
long slack = 1;
std::string url;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        checks++;                                                                     \
        if (!(cond)) {                                                                \
            failures++;                                                               \
            std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                             \
    } while (0)

// A point the test must not reach.
#define FAILED(why)                                                                   \
    do {                                                                              \
        checks++;                                                                     \
        failures++;                                                                   \
        std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, why);                    \
    } while (0)

std::string name(const char *what) {
    static int n;
    return std::string("cpp:") + what + ":" + std::to_string(getpid()) + ":" + std::to_string(++n);
}

long ms_since(clock_type::time_point t0) {
    return static_cast<long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0).count());
}

// A thread of another client holds `m` until told to let go.
class holder {
  public:
    template <class M>
    explicit holder(M &m) {
        th_ = std::thread([this, &m] {
            std::unique_lock<M> g(m);
            {
                std::lock_guard<std::mutex> lk(mu_);
                held_ = true;
            }
            cv_.notify_all();
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [this] { return stop_; });
        });
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [this] { return held_; });
    }
    ~holder() {
        {
            std::lock_guard<std::mutex> lk(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        th_.join();
    }

  private:
    std::mutex mu_;
    std::condition_variable cv_;
    bool held_ = false, stop_ = false;
    std::thread th_;
};

// Two threads, each on its own mutex object (of its own client when two
// clients are given), take turns under std::unique_lock / std::scoped_lock:
// never both inside.
template <class Guard>
void exclusion(dlock::client &a, dlock::client &b) {
    std::string n = name("excl");
    dlock::mutex ma(a, n), mb(b, n);
    std::atomic<int> inside{0}, overlaps{0}, total{0};
    auto work = [&](dlock::mutex &m) {
        for (int i = 0; i < 25; i++) {
            Guard g(m);
            if (inside.fetch_add(1) != 0)
                overlaps++;
            std::this_thread::sleep_for(1ms);
            total++;
            inside--;
        }
    };
    std::thread t1(work, std::ref(ma)), t2(work, std::ref(mb));
    t1.join();
    t2.join();
    CHECK(overlaps == 0);
    CHECK(total == 50);
    CHECK(!ma.is_locked());
}

void test_exclusion(dlock::client &a, dlock::client &b) {
    exclusion<std::unique_lock<dlock::mutex>>(a, a);   // two threads, one client
    exclusion<std::unique_lock<dlock::mutex>>(a, b);   // two clients
    exclusion<std::scoped_lock<dlock::mutex>>(a, b);
    exclusion<std::lock_guard<dlock::mutex>>(a, b);
}

// std::scoped_lock of two dlock mutexes (std::lock's deadlock avoidance)
// against another client holding one of them.
void test_scoped_two(dlock::client &a, dlock::client &b) {
    std::string n1 = name("two"), n2 = name("two");
    dlock::mutex a1(a, n1), a2(a, n2), b2(b, n2);
    {
        std::scoped_lock g(a1, a2);
        CHECK(a1.is_held() && a2.is_held());
        CHECK(!b2.try_lock());
    }
    CHECK(!a1.is_locked() && !a2.is_locked());
    std::atomic<bool> got{false};
    std::thread t;
    {
        std::unique_lock<dlock::mutex> hold(b2);
        t = std::thread([&] {
            std::scoped_lock g(a1, a2);   // waits for b2's holder
            got = true;
        });
        std::this_thread::sleep_for(200ms);
        CHECK(!got);
    }
    t.join();
    CHECK(got);
    CHECK(!a1.is_locked() && !a2.is_locked());
}

// The timed tries: false after about the wait while another client holds the
// lock, true once it is free.
void test_timed(dlock::client &a, dlock::client &b) {
    std::string n = name("timed");
    dlock::mutex ma(a, n), mb(b, n);
    {
        holder h(ma);
        CHECK(!mb.try_lock());
        auto t0 = clock_type::now();
        CHECK(!mb.try_lock_for(300ms));
        long el = ms_since(t0);
        CHECK(el >= 290);
        CHECK(el < 300 + 1000 * slack);

        t0 = clock_type::now();
        CHECK(!mb.try_lock_until(clock_type::now() + 250ms));
        el = ms_since(t0);
        CHECK(el >= 240);
        CHECK(el < 250 + 1000 * slack);
        // any clock's time point
        CHECK(!mb.try_lock_until(std::chrono::system_clock::now() + 50ms));

        t0 = clock_type::now();
        std::unique_lock<dlock::mutex> g(mb, 200ms);
        CHECK(!g.owns_lock());
        CHECK(ms_since(t0) >= 190);

        std::error_code ec = dlock::make_error_code(DLOCK_EINVAL);
        CHECK(!mb.try_lock_for(10ms, ec));
        CHECK(!ec);   // a timeout is an answer, not an error
    }
    // released: a waiter gets it within its wait
    CHECK(mb.try_lock_for(2s));
    CHECK(mb.is_held());
    mb.unlock();

    // woken by the release, not by the end of its wait
    std::atomic<long> waited{-1};
    std::thread t;
    {
        std::unique_lock<dlock::mutex> g(ma);
        t = std::thread([&] {
            auto t0 = clock_type::now();
            std::unique_lock<dlock::mutex> w(mb, 10s);
            waited = w.owns_lock() ? ms_since(t0) : -2;
        });
        std::this_thread::sleep_for(150ms);
    }
    t.join();
    CHECK(waited >= 100);
    CHECK(waited < 150 + 2000 * slack);
}

// Reentrancy, the lease option, the owner's queries, the fencing token.
void test_lock_misc(dlock::client &a) {
    std::string n = name("misc");
    dlock::mutex m(a, n);
    CHECK(m.name() == n);
    CHECK(m.lease() == dlock::watchdog);
    m.lock();
    m.lock();   // reentrant, as Redisson's RLock
    CHECK(m.hold_count() == 2);
    m.unlock();
    CHECK(m.is_held());
    m.unlock();
    CHECK(!m.is_locked());

    dlock::mutex leased(a, name("lease"), 2s);
    CHECK(leased.lease() == 2s);
    {
        std::lock_guard<dlock::mutex> g(leased);
        auto ttl = leased.ttl();
        CHECK(ttl > 0ms && ttl <= 2s);
    }
    CHECK(leased.ttl() == -2ms);

    dlock::fenced_mutex f(a, name("fenced"));
    uint64_t t1, t2;
    {
        std::lock_guard<dlock::fenced_mutex> g(f);
        t1 = f.token();
    }
    {
        std::lock_guard<dlock::fenced_mutex> g(f);
        t2 = f.token();
    }
    CHECK(t1 > 0 && t2 > t1);
    uint64_t t3 = f.lock_fenced();
    CHECK(t3 > t2);
    f.unlock();

    dlock::fair_mutex fm(a, name("fair"));
    {
        std::unique_lock<dlock::fair_mutex> g(fm);
        CHECK(fm.is_held());
    }
    CHECK(!fm.is_locked());

    /* Non-reentrant: the second lock by the holder throws, the hold stays. */
    dlock::nonreentrant_mutex nr(a, name("nonreentrant"));
    dlock::nonreentrant_fair_mutex nrf(a, name("nonreentrant-fair"));
    for (dlock::basic_mutex *once : {static_cast<dlock::basic_mutex *>(&nr),
                                  static_cast<dlock::basic_mutex *>(&nrf)}) {
        std::lock_guard<dlock::basic_mutex> g(*once);
        bool threw = false;
        try {
            once->lock();
        } catch (const dlock::error &e) {
            threw = e.code() == std::errc::resource_deadlock_would_occur &&
                    e.code().value() == DLOCK_EREENTRY;
        }
        CHECK(threw);
        threw = false;
        try {
            (void)once->try_lock();
        } catch (const dlock::error &e) {
            threw = e.code().value() == DLOCK_EREENTRY;
        }
        CHECK(threw);
        CHECK(once->is_held());
    }
    CHECK(!nr.is_locked() && !nrf.is_locked());

    /* The spin lock: reentrant, a bad back-off throws, a good one is kept. */
    dlock::spin_mutex sp(a, name("spin"));
    {
        std::lock_guard<dlock::spin_mutex> g(sp);
        CHECK(sp.try_lock());
        sp.unlock();
        CHECK(sp.is_held());
    }
    CHECK(!sp.is_locked());
    bool threw = false;
    try {
        sp.set_backoff(std::chrono::milliseconds(10), std::chrono::milliseconds(5));
    } catch (const dlock::error &e) {
        threw = e.code().value() == DLOCK_EINVAL;
    }
    CHECK(threw);
    sp.set_backoff(std::chrono::milliseconds(5), std::chrono::milliseconds(50), 3);
    {
        std::lock_guard<dlock::spin_mutex> g(sp);
        CHECK(sp.is_held());
    }

    /* The rate limiter: no rate is DLOCK_ENOTFOUND; then 2 per minute. */
    dlock::rate_limiter rl(a, name("rate"));
    threw = false;
    try {
        (void)rl.available();
    } catch (const dlock::error &e) {
        threw = e.code().value() == DLOCK_ENOTFOUND &&
                e.code() == std::errc::no_such_file_or_directory;
    }
    CHECK(threw);
    CHECK(rl.try_set_rate(dlock::rate_limiter::type::overall, 2, std::chrono::minutes(1)));
    CHECK(!rl.try_set_rate(dlock::rate_limiter::type::overall, 9, std::chrono::minutes(1)));
    CHECK(rl.config().rate == 2);
    CHECK(rl.try_acquire(2));
    CHECK(!rl.try_acquire());
    CHECK(!rl.try_acquire_for(std::chrono::milliseconds(20)));
    rl.release(1);
    CHECK(rl.available() == 1);
    CHECK(rl.erase());
}

// An explicit owner: locked in one thread, unlocked in another.
void test_owner(dlock::client &a) {
    std::string n = name("owner");
    dlock::mutex m(a, n, dlock::owner{a.new_owner_id()});
    std::thread([&] { m.lock(); }).join();
    CHECK(m.is_held());
    dlock::mutex other(a, n);   // this thread's owner
    CHECK(!other.try_lock());
    std::error_code ec;
    std::thread([&] { m.unlock(ec); }).join();
    CHECK(!ec);
    CHECK(!m.is_locked());
}

// A hand-over: a's owner passes its hold to b's, who adopts it; nobody else
// could take it in between, and the giver no longer holds it.
void test_handover(dlock::client &a, dlock::client &b) {
    std::string n = name("handover");
    std::string to = b.new_owner_id();
    dlock::mutex giver(a, n, dlock::owner{a.new_owner_id()});
    dlock::mutex taker(b, n, dlock::owner{to});
    giver.lock();
    giver.lock();
    giver.transfer(to);
    CHECK(!giver.is_held());
    CHECK(taker.is_held());
    CHECK(taker.adopt() == 2);
    std::error_code ec;
    giver.unlock(ec);
    CHECK(ec.value() == DLOCK_ENOTOWNER);
    taker.unlock();
    CHECK(taker.is_locked());
    taker.unlock();
    CHECK(!taker.is_locked());
    // an election: the leader hands over to a chosen successor
    std::string en = name("handover-elect"), succ = b.new_owner_id();
    dlock::election leader(a, en), next(b, en, dlock::owner{succ});
    uint64_t t1 = leader.campaign();
    leader.handover(succ);
    CHECK(!leader.leading());
    CHECK(!leader.try_lock());
    uint64_t t2 = next.adopt();
    CHECK(t2 > t1 && next.leading());
    next.resign();
    bool threw = false;
    try {
        giver.transfer("no-colon");
    } catch (const dlock::error &e) {
        threw = e.status() == DLOCK_EINVAL;
    }
    CHECK(threw);
}

// Revocation on request: b's holder hears a's request (name, owner, note)
// and lets go in its handler; a's waiter gets in; the async request answers
// free once it has.
void test_revoke_request(dlock::client &a, dlock::client &b) {
    std::string n = name("revoke"), id = b.new_owner_id();
    dlock::mutex holder(b, n, dlock::owner{id});
    std::promise<std::string> heard;
    holder.on_revoke([&](const std::string &nm, const std::string &owner, const std::string &note) {
        holder.unlock();
        heard.set_value(nm + "|" + owner + "|" + note);
    });
    holder.lock();
    dlock::mutex asker(a, n);
    auto f = heard.get_future();
    dlock_revoke_answer first = asker.request_revoke("please");
    CHECK(first.holders == 1);
    // Asked again until heard: by a message once its subscription is made,
    // or from the record when the subscription comes up.
    for (int i = 0; i < 500 * slack; i++) {
        if (f.wait_for(std::chrono::milliseconds(10)) == std::future_status::ready)
            break;
        dlock_revoke_answer again = asker.request_revoke("please");
        if (again.holders == 0 || again.listeners > 0)
            break;
    }
    CHECK(f.wait_for(std::chrono::seconds(2 * slack)) == std::future_status::ready);
    CHECK(f.get() == n + "|" + id + "|please");
    CHECK(asker.try_lock_for(std::chrono::seconds(2 * slack)));
    asker.unlock();
    holder.on_revoke(nullptr);
    std::promise<dlock::async_result> done;
    asker.request_revoke_async("", [&](const dlock::async_result &r) { done.set_value(r); });
    dlock::async_result r = done.get_future().get();
    CHECK(r && !r.flag && r.count == 0);
}

// The errors: thrown with the status and the message, or as an error_code.
void test_errors(dlock::client &a) {
    dlock::mutex m(a, name("err"));
    try {
        m.release();
        FAILED("release of a lock not held did not throw");
    } catch (const dlock::error &e) {
        CHECK(e.status() == DLOCK_ENOTOWNER);
        CHECK(e.code() == DLOCK_ENOTOWNER);
        CHECK(e.code() == std::errc::operation_not_permitted);
        CHECK(e.code().category() == dlock::category());
        CHECK(std::string(e.what()).size() > 0);
        CHECK(e.code().message() == dlock_strerror(DLOCK_ENOTOWNER));
    }
    // as a std::system_error
    try {
        m.release();
    } catch (const std::system_error &e) {
        CHECK(e.code().value() == DLOCK_ENOTOWNER);
    }
    std::error_code ec;
    CHECK(!m.unlock(ec));
    CHECK(ec == DLOCK_ENOTOWNER);
    m.unlock();   // never throws
    CHECK(m.lock(ec) && !ec);
    CHECK(m.unlock(ec) && !ec);

    try {
        dlock::mutex bad(a, "");
        FAILED("an empty name did not throw");
    } catch (const dlock::error &e) {
        CHECK(e.status() == DLOCK_EINVAL);
        CHECK(e.code() == std::errc::invalid_argument);
    }
    try {
        dlock::mutex bad(a, name("neg"), -5ms);
        FAILED("a negative lease did not throw");
    } catch (const dlock::error &e) {
        CHECK(e.status() == DLOCK_EINVAL);
    }

    // A key that is not a lock.
    dlock::semaphore s(a, name("notalock"));
    s.set_permits(3);
    dlock::mutex wrong(a, s.name());
    try {
        wrong.lock();
        FAILED("locking a semaphore's key did not throw");
    } catch (const dlock::error &e) {
        CHECK(e.status() == DLOCK_EWRONGTYPE);
        // The key named; none of Lua's internals ("script: <sha>, on
        // @user_script:<line>.") that Redis adds to an error in a script.
        const std::string what = e.what();
        CHECK(what.find(s.name()) != std::string::npos);
        CHECK(what.find("user_script") == std::string::npos);
        CHECK(what.find(" script: ") == std::string::npos);
    }
    CHECK(!wrong.try_lock(ec));
    CHECK(ec == DLOCK_EWRONGTYPE);

    // Connecting: a bad URL, nobody listening.
    dlock::client none = dlock::client::open("nosuch://x", ec);
    CHECK(!none);
    CHECK(ec == DLOCK_EINVAL);
    try {
        dlock::client c("nosuch://x");
        FAILED("a bad URL did not throw");
    } catch (const dlock::error &e) {
        CHECK(e.status() == DLOCK_EINVAL);
        CHECK(std::string(e.what()).find("nosuch") != std::string::npos);
    }
    try {
        dlock::config bad;
        bad.clock_jump(-2ms);
        FAILED("a bad clock jump allowance did not throw");
    } catch (const dlock::error &e) {
        CHECK(e.status() == DLOCK_EINVAL);
        CHECK(std::string(dlock_lost_cause_str(DLOCK_CAUSE_CLOCK_JUMP)) == "server clock jumped");
    }
    dlock::config cfg("redis://127.0.0.1:1");
    cfg.connect_timeout(500ms).command_timeout(500ms).clock_jump(100ms);
    dlock::client down = dlock::client::open(cfg, ec);
    CHECK(!down);
    CHECK(ec == DLOCK_ECONN);
}

// A lost hold reported to the client's callback in the form with the cause
// as an argument (config::lost_callback's overload): called once, reason
// GONE, the cause the same as dlock_last_lost_cause() says during the call.
struct lost_seen {
    std::atomic<int> calls{0}, reason{-1}, cause{-1}, tls{-1};
};

void test_lost_cause(dlock::client &b) {
    lost_seen seen;
    dlock::config cfg(url);
    cfg.watchdog_timeout(1500ms).lost_callback(
        [](const char *, const char *, dlock_lost_reason reason, dlock_lost_cause cause,
           void *ud) {
            auto *g = static_cast<lost_seen *>(ud);
            g->reason = reason;
            g->cause = cause;
            g->tls = dlock_last_lost_cause();
            g->calls++;
        },
        &seen);
    dlock::client a(cfg);
    std::string n = name("lost-cause");
    dlock::mutex m(a, n), other(b, n);
    m.lock();
    CHECK(other.force_unlock());
    auto until = std::chrono::steady_clock::now() + 5s * slack;
    while (seen.calls == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(5ms);
    CHECK(seen.calls == 1);
    CHECK(seen.reason == DLOCK_LOST_GONE);
    CHECK(seen.cause == seen.tls);
    CHECK(seen.cause != DLOCK_CAUSE_UNREACHABLE && seen.cause != DLOCK_CAUSE_PAUSED);
}

// The semaphore counts as std::counting_semaphore does.
void test_semaphore(dlock::client &a, dlock::client &b) {
    std::string n = name("sem");
    dlock::semaphore s(a, n), sb(b, n);
    CHECK(s.available() == 0);
    CHECK(s.try_set_permits(2));
    CHECK(!s.try_set_permits(5));
    CHECK(s.available() == 2);
    CHECK(s.try_acquire());
    CHECK(sb.try_acquire());
    CHECK(!s.try_acquire());
    auto t0 = clock_type::now();
    CHECK(!sb.try_acquire_for(200ms));
    long el = ms_since(t0);
    CHECK(el >= 190 && el < 200 + 1000 * slack);
    CHECK(!s.try_acquire_until(clock_type::now() + 50ms));
    CHECK(s.available() == 0);
    s.release();
    CHECK(s.available() == 1);
    CHECK(sb.try_acquire());
    // a waiter in acquire() wakes on another client's release
    std::atomic<bool> got{false};
    std::thread t([&] {
        sb.acquire();
        got = true;
    });
    std::this_thread::sleep_for(150ms);
    CHECK(!got);
    s.release();
    t.join();
    CHECK(got);
    s.release(2);
    CHECK(s.available() == 2);
    CHECK(!s.try_acquire(3));
    CHECK(s.try_acquire(2));
    s.release(2);
    std::error_code ec;
    CHECK(!s.release(0, ec));
    CHECK(ec == DLOCK_EINVAL);
    CHECK(s.drain() == 2);
    CHECK(s.available() == 0);
}

void test_shared(dlock::client &a, dlock::client &b) {
    std::string n = name("rw");
    dlock::shared_mutex ra(a, n), rb(b, n);
    {
        std::shared_lock<dlock::shared_mutex> r1(ra);
        std::shared_lock<dlock::shared_mutex> r2(rb, 1s);   // readers share
        CHECK(r2.owns_lock());
        std::thread([&] {   // a writer (another owner) waits, and times out
            auto t0 = clock_type::now();
            std::unique_lock<dlock::shared_mutex> w(rb, 200ms);
            CHECK(!w.owns_lock());
            CHECK(ms_since(t0) >= 190);
        }).join();
        // the same owner reading cannot write: an error, not a wait
        try {
            (void)rb.try_lock_for(1s);
            FAILED("a reader took the write lock");
        } catch (const dlock::error &e) {
            CHECK(e.status() == DLOCK_EDEADLK);
        }
    }
    {
        std::unique_lock<dlock::shared_mutex> w(ra);
        CHECK(ra.write().is_held());
        CHECK(!rb.try_lock_shared());
        CHECK(!rb.try_lock_shared_for(100ms));
    }
    CHECK(rb.try_lock_shared());
    rb.unlock_shared();
    // a reader asking for the write side
    std::shared_lock<dlock::shared_mutex> r(ra);
    try {
        ra.lock();
        FAILED("a reader took the write lock");
    } catch (const dlock::error &e) {
        CHECK(e.status() == DLOCK_EDEADLK);
        CHECK(e.code() == std::errc::resource_deadlock_would_occur);
    }
}

// Writer-first: once a's writer waits, b's new reader (writer-first) is
// refused while a's held read re-enters; the writer gets in when it ends.
// The client-wide option: every shared_mutex of client c is writer-first.
void test_writer_first(dlock::client &a, dlock::client &b) {
    std::string n = name("rwwf");
    dlock::shared_mutex ra(a, n), wa(a, n, dlock::owner{a.new_owner_id()}), rb(b, n);
    ra.set_writer_first(true);
    wa.set_writer_first(true);
    rb.set_writer_first(true);
    ra.lock_shared();
    std::atomic<bool> got{false};
    std::thread w([&] {
        std::unique_lock<dlock::shared_mutex> g(wa, 5s * slack);
        CHECK(g.owns_lock());
        got = true;
    });
    bool queued = false;   // b's reader refused once the writer's intent is there
    for (int i = 0; i < 200 && !queued; i++) {
        if (rb.try_lock_shared()) {
            rb.unlock_shared();
            std::this_thread::sleep_for(5ms);
        } else {
            queued = true;
        }
    }
    CHECK(queued);
    CHECK(ra.try_lock_shared());   // the reader that holds re-enters
    ra.unlock_shared();
    CHECK(!got);
    ra.unlock_shared();
    w.join();
    CHECK(got);
    CHECK(rb.try_lock_shared_for(2s * slack));   // the writer released
    rb.unlock_shared();

    dlock::client c(dlock::config(url).writer_first(true));
    dlock::shared_mutex rc(c, n), wc(c, n, dlock::owner{c.new_owner_id()});
    rc.lock_shared();
    std::thread w2([&] {
        std::unique_lock<dlock::shared_mutex> g(wc, 5s * slack);
        CHECK(g.owns_lock());
    });
    queued = false;
    dlock::shared_mutex rc2(c, n, dlock::owner{c.new_owner_id()});
    for (int i = 0; i < 200 && !queued; i++) {
        if (rc2.try_lock_shared()) {
            rc2.unlock_shared();
            std::this_thread::sleep_for(5ms);
        } else {
            queued = true;
        }
    }
    CHECK(queued);
    rc.unlock_shared();
    w2.join();
}

void test_latch(dlock::client &a, dlock::client &b) {
    std::string n = name("latch");
    dlock::latch l(a, n), lb(b, n);
    CHECK(l.try_wait());   // absent: zero
    CHECK(l.try_set_count(2));
    CHECK(l.count() == 2);
    CHECK(!l.try_wait());
    lb.count_down();
    CHECK(!l.wait_for(100ms));
    std::atomic<bool> done{false};
    std::thread t([&] {
        l.wait();
        done = true;
    });
    std::this_thread::sleep_for(100ms);
    CHECK(!done);
    lb.count_down();
    t.join();
    CHECK(done);
    CHECK(l.count() == 0);
}

void test_barrier(dlock::client &a, dlock::client &b) {
    std::string n = name("barrier");
    dlock::barrier x(a, n, 2), y(b, n, 2);
    CHECK(x.parties() == 2 && x.name() == n && x.member() != y.member());
    CHECK(!x.try_enter());
    CHECK(!x.enter_for(100ms));
    CHECK(x.members() == 0);
    std::atomic<bool> done{false};
    std::thread t([&] {
        x.enter();
        done = true;
    });
    std::this_thread::sleep_for(200ms);
    CHECK(!done);
    CHECK(y.enter_for(5s));
    t.join();
    CHECK(done && x.in() && y.in());
    CHECK(x.round() != 0 && x.round() == y.round());
    try {
        dlock::barrier z(a, n, 3);
        z.enter_for(100ms);
        FAILED("another N entered");
    } catch (const dlock::error &e) {
        CHECK(e.status() == DLOCK_EINVAL);
    }
    CHECK(!x.leave_for(100ms));   // y is still in; x has left all the same
    CHECK(!x.in());
    CHECK(y.leave_for(5s));
    CHECK(y.members() == 0);
    // Asynchronously: x's callbacks run once y has entered (left).
    for (int leave = 0; leave < 2; leave++) {
        auto p = std::make_shared<std::promise<dlock::async_result>>();
        std::future<dlock::async_result> f = p->get_future();
        auto cb = [p](const dlock::async_result &r) { p->set_value(r); };
        if (leave)
            x.leave_async(5s, cb);
        else
            x.enter_async(5s, cb);
        CHECK(f.wait_for(200ms) == std::future_status::timeout);
        CHECK(leave ? y.leave_for(5s) : y.enter_for(5s));
        CHECK(f.wait_for(std::chrono::seconds(5 * slack)) == std::future_status::ready);
        dlock::async_result r = f.get();
        CHECK(r && r.token == y.round());
    }
    // A cancelled asynchronous enter withdraws.
    {
        dlock::cancel_token tok;
        auto p = std::make_shared<std::promise<dlock::async_result>>();
        std::future<dlock::async_result> f = p->get_future();
        x.enter_async(dlock::wait_forever, tok, [p](const dlock::async_result &r) { p->set_value(r); });
        std::this_thread::sleep_for(100ms);
        tok.fire();
        CHECK(f.wait_for(std::chrono::seconds(5 * slack)) == std::future_status::ready);
        CHECK(f.get().status == DLOCK_ECANCELED);
        CHECK(!x.in());
        // withdrawn: the withdrawal is sent before the callback, not awaited
        auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5 * slack);
        while (x.members() != 0 && std::chrono::steady_clock::now() < end)
            std::this_thread::sleep_for(10ms);
        CHECK(x.members() == 0);
    }
}

void test_permits(dlock::client &a) {
    dlock::permit_semaphore p(a, name("permits"));
    CHECK(p.try_set_permits(1));
    std::string id = p.acquire(5s);
    CHECK(id.size() == 32);
    CHECK(p.try_acquire().empty());
    CHECK(p.try_acquire_for(100ms).empty());
    p.release(id);
    try {
        p.release(id);
        FAILED("a permit released twice");
    } catch (const dlock::error &e) {
        CHECK(e.status() == DLOCK_ENOTOWNER);
    }
    std::string id2 = p.try_acquire();
    CHECK(!id2.empty());
    std::error_code ec;
    CHECK(p.release(id2, ec) && !ec);
    CHECK(p.available() == 1);
}

// Moves: the handle goes with the move; the client closes after its last
// handle (handles keep it).
void test_moves() {
    std::string n = name("move");
    dlock::mutex *outlive = nullptr;
    {
        dlock::client c(url);
        dlock::mutex m(c, n);
        dlock::mutex m2 = std::move(m);
        CHECK(!m);
        CHECK(static_cast<bool>(m2));
        std::vector<dlock::mutex> v;
        v.push_back(std::move(m2));
        v.emplace_back(c, name("move"));
        { std::lock_guard<dlock::mutex> g(v[0]); CHECK(v[0].is_held()); }
        outlive = new dlock::mutex(std::move(v[1]));
        dlock::client c2 = std::move(c);
        CHECK(!c);
        CHECK(static_cast<bool>(c2));
        c2.ping();
    }
    // the clients are gone; the handle keeps the connection
    {
        std::lock_guard<dlock::mutex> g(*outlive);
        CHECK(outlive->is_held());
    }
    delete outlive;
}

}  // namespace

// Runs `start(cb)` with a callback that hands its result over, and waits
// (bounded) for it: the std::future adaptor docs/cpp.md shows.
template <class Start>
dlock::async_result await_async(Start start) {
    auto p = std::make_shared<std::promise<dlock::async_result>>();
    std::future<dlock::async_result> f = p->get_future();
    start([p](const dlock::async_result &r) { p->set_value(r); });
    if (f.wait_for(std::chrono::seconds(20 * slack)) != std::future_status::ready) {
        FAILED("an asynchronous call never completed");
        dlock::async_result r;
        r.status = dlock::make_error_code(DLOCK_ETIMEDOUT);
        r.message = "never completed";
        return r;
    }
    return f.get();
}

// Runs `wait()` in a thread, fires `tok` after 150 ms: the wait must end with
// DLOCK_ECANCELED (thrown), soon after the fire and not before.
template <class Wait>
void cancelled(const dlock::cancel_token &tok, Wait wait) {
    std::atomic<int> status{1};
    std::atomic<clock_type::rep> ended{0};
    std::thread t([&] {
        try {
            wait();
            status = 0;
        } catch (const dlock::error &e) {
            status = e.status();
            CHECK(e.code() == std::errc::operation_canceled);
        }
        ended = clock_type::now().time_since_epoch().count();
    });
    std::this_thread::sleep_for(150ms);
    auto fired = clock_type::now();
    tok.fire();
    t.join();
    CHECK(status == DLOCK_ECANCELED);
    // Not before the fire (measured from it, not from the thread's start,
    // which may come late on a loaded machine), and soon after it.
    auto end = clock_type::time_point(clock_type::duration(ended.load()));
    CHECK(end >= fired);
    CHECK(std::chrono::duration_cast<std::chrono::milliseconds>(end - fired).count() <
          2000 * slack);
}

// Cancellation tokens end the waits of every kind that take one.
void test_cancel(dlock::client &a, dlock::client &b) {
    std::string n = name("cancel");
    dlock::mutex ma(a, n), mb(b, n);
    holder h(ma);
    dlock::cancel_token tok;
    CHECK(!tok.fired());
    cancelled(tok, [&] { mb.lock(tok); });
    CHECK(tok.fired());
    CHECK(!mb.is_held());
    // a fired token ends the next wait at once, until reset
    std::error_code ec;
    auto t0 = clock_type::now();
    CHECK(!mb.lock(tok, ec));
    CHECK(ec == DLOCK_ECANCELED);
    CHECK(ms_since(t0) < 1000 * slack);
    tok.reset();
    CHECK(!tok.fired());
    t0 = clock_type::now();
    CHECK(!mb.try_lock_for(200ms, tok));   // runs out: an answer, no throw
    CHECK(ms_since(t0) >= 190);
    cancelled(tok, [&] { (void)mb.try_lock_for(30s, tok); });
    tok.reset();
    cancelled(tok, [&] { (void)mb.try_lock_until(clock_type::now() + 30s, tok); });

    dlock::semaphore s(a, name("cancel-sem"));
    s.set_permits(0);
    tok.reset();
    cancelled(tok, [&] { s.acquire(1, tok); });
    tok.reset();
    cancelled(tok, [&] { (void)s.try_acquire_for(30s, 1, tok); });
    CHECK(s.available() == 0);

    dlock::latch l(a, name("cancel-latch"));
    CHECK(l.try_set_count(1));
    tok.reset();
    cancelled(tok, [&] { l.wait(tok); });
    tok.reset();
    CHECK(!l.wait_for(100ms, tok));

    dlock::permit_semaphore p(a, name("cancel-permits"));
    CHECK(p.try_set_permits(0));
    tok.reset();
    cancelled(tok, [&] { (void)p.try_acquire_for(dlock::wait_forever, dlock::watchdog, tok); });
}

#ifdef DLOCK_HPP_STOP_TOKEN
// C++20: a std::jthread's stop request ends a wait through cancel_token.
void test_stop_token(dlock::client &a, dlock::client &b) {
    std::string n = name("stop");
    dlock::mutex ma(a, n), mb(b, n);
    holder h(ma);
    std::atomic<int> status{1};
    auto t0 = clock_type::now();
    {
        std::jthread t([&](std::stop_token st) {
            try {
                mb.lock(dlock::cancel_token(st));
                status = 0;
            } catch (const dlock::error &e) {
                status = e.status();
            }
        });
        std::this_thread::sleep_for(150ms);
    }   // ~jthread: request_stop(), join()
    CHECK(status == DLOCK_ECANCELED);
    CHECK(ms_since(t0) < 150 + 2000 * slack);
    std::stop_source src;
    src.request_stop();
    dlock::cancel_token done(src.get_token());   // already stopped: fired
    CHECK(done.fired());
    std::error_code ec;
    CHECK(!mb.lock(done, ec) && ec == DLOCK_ECANCELED);
}
#endif

// multi_lock: all or nothing, nothing held while waiting, a standard guard.
void test_multilock(dlock::client &a, dlock::client &b) {
    std::string n1 = name("ml"), n2 = name("ml"), n3 = name("ml");
    dlock::mutex a1(a, n1), a2(a, n2);
    dlock::fair_mutex a3(a, n3);
    dlock::mutex b1(b, n1), b2(b, n2), b3(b, n3);
    dlock::multi_lock ml({a1, a2, a3});
    CHECK(ml.size() == 3);
    {
        std::unique_lock<dlock::multi_lock> g(ml);
        CHECK(a1.is_held() && a2.is_held() && a3.is_held());
        CHECK(!b1.try_lock() && !b2.try_lock() && !b3.try_lock());
    }
    CHECK(!a1.is_locked() && !a2.is_locked() && !a3.is_locked());
    {
        holder h(b2);   // another client holds one of the three
        CHECK(!ml.try_lock());
        CHECK(!a1.is_locked() && !a3.is_locked());   // what it took, given back
        auto t0 = clock_type::now();
        CHECK(!ml.try_lock_for(200ms));
        CHECK(ms_since(t0) >= 190);
        CHECK(!a1.is_locked());
        dlock::cancel_token tok;
        cancelled(tok, [&] { ml.lock(tok); });
        CHECK(!a1.is_locked() && !a3.is_locked());
    }
    CHECK(ml.try_lock_for(2s));
    ml.unlock();
    std::error_code ec;
    CHECK(!ml.unlock(ec) && ec == DLOCK_ENOTOWNER);
    try {
        dlock::multi_lock dup({a1, b1});   // the same lock twice
        FAILED("a multi_lock naming one lock twice");
    } catch (const dlock::error &e) {
        CHECK(e.status() == DLOCK_EINVAL);
    }
    // std::scoped_lock takes a multi_lock with a plain mutex
    dlock::mutex a4(a, name("ml"));
    {
        std::scoped_lock g(ml, a4);
        CHECK(a1.is_held() && a4.is_held());
    }
    CHECK(!a1.is_locked() && !a4.is_locked());
}

// red_lock over three databases of the test server (independent as far as
// the RedLock rules go: same address, other database): a majority suffices.
void test_redlock() {
    std::vector<std::unique_ptr<dlock::client>> cs, other;
    for (int db = 1; db <= 3; db++) {
        cs.push_back(std::make_unique<dlock::client>(url + "/" + std::to_string(db)));
        other.push_back(std::make_unique<dlock::client>(url + "/" + std::to_string(db)));
    }
    std::string n = name("redlock");
    std::vector<dlock::mutex> ms, os;
    for (int i = 0; i < 3; i++) {
        ms.emplace_back(*cs[static_cast<size_t>(i)], n);
        os.emplace_back(*other[static_cast<size_t>(i)], n,
                        dlock::owner{other[static_cast<size_t>(i)]->new_owner_id()});
    }
    dlock::red_lock rl({ms[0], ms[1], ms[2]});
    CHECK(rl.try_lock());
    CHECK(ms[0].is_held() && ms[1].is_held() && ms[2].is_held());
    rl.unlock();
    CHECK(!ms[0].is_locked());
    os[0].lock();   // one of three held elsewhere: a majority is still free
    {
        std::unique_lock<dlock::red_lock> g(rl, 2s);
        CHECK(g.owns_lock());
        CHECK(ms[1].is_held() && ms[2].is_held() && !ms[0].is_held());
    }
    os[1].lock();   // two of three: no majority
    CHECK(!rl.try_lock());
    CHECK(!ms[2].is_locked());   // the one it took, given back
    os[0].unlock();
    os[1].unlock();
    try {
        dlock::red_lock two({ms[0], ms[1]});
        FAILED("a red_lock over two locks");
    } catch (const dlock::error &e) {
        CHECK(e.status() == DLOCK_EINVAL);
    }
}

// election: leadership as a guard, the terms, the observers.
void test_election(dlock::client &a, dlock::client &b) {
    std::string n = name("elect");
    dlock::election ea(a, n), eb(b, n);
    CHECK(ea.name() == n);
    CHECK(ea.term() == 0 && !ea.leading());
    uint64_t first = 0;
    {
        std::unique_lock<dlock::election> lead(ea);
        first = ea.term();
        CHECK(first > 0);
        CHECK(!eb.try_lock());
        dlock::election::leader_info l = eb.leader();
        CHECK(l.term == first);
        CHECK(l.who.find(std::to_string(getpid())) != std::string::npos);
        CHECK(!eb.await_change(first, 100ms).has_value());   // no change: runs out
        dlock::cancel_token tok;
        cancelled(tok, [&] { eb.lock(tok); });
    }   // resigned
    CHECK(ea.term() == 0);
    CHECK(eb.leader().term == 0);
    try {
        ea.resign();
        FAILED("resign while not leading");
    } catch (const dlock::error &e) {
        CHECK(e.status() == DLOCK_ENOTOWNER);
    }
    // an observer sees the next leader; terms only grow
    std::thread t([&] {
        std::this_thread::sleep_for(100ms);
        (void)eb.campaign();
    });
    std::optional<dlock::election::leader_info> next = ea.await_change(0, 10s);
    t.join();
    CHECK(next.has_value() && next->term > first);
    CHECK(eb.term() > first);
    CHECK(!ea.try_lock_for(100ms));
    eb.resign();
}

// The asynchronous forms: callbacks, each once, with the outcome.
void test_async(dlock::client &a, dlock::client &b) {
    std::string n = name("async");
    dlock::mutex m(a, n, dlock::owner{a.new_owner_id()});
    dlock::mutex other(b, n, dlock::owner{b.new_owner_id()});
    dlock::async_result r = await_async([&](auto cb) { m.lock_async(1s, cb); });
    CHECK(r && !r.status);
    CHECK(m.is_held());   // the owner id's hold, seen from this thread
    r = await_async([&](auto cb) { other.lock_async(100ms, cb); });
    CHECK(r.status == DLOCK_ETIMEDOUT && !r);
    {
        dlock::cancel_token keep;
        std::future<dlock::async_result> f;
        {
            dlock::cancel_token tok;   // goes away: the pending call keeps it
            keep = tok;
            auto p = std::make_shared<std::promise<dlock::async_result>>();
            f = p->get_future();
            // bounded, so that a cancellation that does not work fails the
            // check below instead of hanging the test
            other.lock_async(std::chrono::seconds(5 * slack), tok,
                             [p](const dlock::async_result &res) { p->set_value(res); });
        }
        std::this_thread::sleep_for(100ms);
        auto t0 = clock_type::now();
        keep.fire();
        CHECK(f.wait_for(std::chrono::seconds(10 * slack)) == std::future_status::ready);
        CHECK(f.get().status == DLOCK_ECANCELED);
        CHECK(ms_since(t0) < 2000 * slack);
    }
    // a temporary token: the pending call keeps it alive (under ASan a
    // token freed early is a use after free)
    r = await_async([&](auto cb) { other.lock_async(200ms, dlock::cancel_token(), cb); });
    CHECK(r.status == DLOCK_ETIMEDOUT);
    r = await_async([&](auto cb) { m.unlock_async(cb); });
    CHECK(!r.status);
    CHECK(!m.is_locked());
    r = await_async([&](auto cb) { m.unlock_async(cb); });
    CHECK(r.status == DLOCK_ENOTOWNER);
    CHECK(!r.message.empty());

    // refused at the call: a thread-owner handle; the callback never runs
    dlock::mutex plain(a, n);
    std::atomic<int> ran{0};
    try {
        plain.lock_async(1s, [&](const dlock::async_result &) { ran++; });
        FAILED("lock_async on a thread-owner handle");
    } catch (const dlock::error &e) {
        CHECK(e.status() == DLOCK_EINVAL);
    }

    // fenced token and term come in the result
    dlock::election e(a, name("async-elect"));
    r = await_async([&](auto cb) { e.campaign_async(1s, cb); });
    CHECK(!r.status && r.token > 0 && r.token == e.term());
    r = await_async([&](auto cb) { e.leader_async(cb); });
    CHECK(r.token == e.term() && r.text.find(std::to_string(getpid())) != std::string::npos);
    r = await_async([&](auto cb) { e.resign_async(cb); });
    CHECK(!r.status && e.term() == 0);

    dlock::semaphore s(a, name("async-sem"));
    s.set_permits(1);
    r = await_async([&](auto cb) { s.acquire_async(1, 1s, cb); });
    CHECK(!r.status && s.available() == 0);
    r = await_async([&](auto cb) { s.acquire_async(1, 100ms, cb); });
    CHECK(r.status == DLOCK_ETIMEDOUT);
    r = await_async([&](auto cb) { s.release_async(1, cb); });
    CHECK(!r.status && s.available() == 1);

    dlock::permit_semaphore p(a, name("async-permits"));
    CHECK(p.try_set_permits(1));
    r = await_async([&](auto cb) { p.acquire_async(1s, 10s, cb); });
    CHECK(!r.status && r.permit_id.size() == 32);
    std::string id = r.permit_id;
    r = await_async([&](auto cb) { p.release_async(id, cb); });
    CHECK(!r.status && p.available() == 1);

    dlock::latch l(a, name("async-latch"));
    CHECK(l.try_set_count(1));
    auto pl = std::make_shared<std::promise<dlock::async_result>>();
    std::future<dlock::async_result> fl = pl->get_future();
    l.wait_async(10s, [pl](const dlock::async_result &res) { pl->set_value(res); });
    CHECK(fl.wait_for(100ms) == std::future_status::timeout);   // still counting
    r = await_async([&](auto cb) { l.count_down_async(cb); });
    CHECK(!r.status && r.count == 0);
    CHECK(fl.wait_for(std::chrono::seconds(10 * slack)) == std::future_status::ready);
    CHECK(!fl.get().status);

    std::string n1 = name("async-ml"), n2 = name("async-ml");
    std::string o = a.new_owner_id();
    dlock::mutex x1(a, n1, dlock::owner{o}), x2(a, n2, dlock::owner{o});
    dlock::multi_lock ml({x1, x2});
    r = await_async([&](auto cb) { ml.lock_async(1s, cb); });
    CHECK(!r.status && x1.is_held() && x2.is_held());
    r = await_async([&](auto cb) { ml.unlock_async(cb); });
    CHECK(!r.status && !x1.is_locked() && !x2.is_locked());
    CHECK(ran == 0);
}


int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: test_hpp REDIS_URL [SLACK]\n");
        return 2;
    }
    std::setvbuf(stdout, nullptr, _IOLBF, 0);   // lines seen even when SIGALRM ends it
    url = argv[1];
    if (argc > 2)
        slack = std::max(1L, std::atol(argv[2]));
    // A hang (a lock never released) ends the run with SIGALRM, not CTest's
    // timeout.
    alarm(static_cast<unsigned>(90 * slack));
    try {
        dlock::client a(url), b(dlock::config(url).client_name("cpp-b"));
        CHECK(a.id() != b.id());
        test_exclusion(a, b);
        test_scoped_two(a, b);
        test_timed(a, b);
        test_lock_misc(a);
        test_owner(a);
        test_handover(a, b);
        test_revoke_request(a, b);
        test_errors(a);
        test_lost_cause(b);
        test_semaphore(a, b);
        test_shared(a, b);
        test_writer_first(a, b);
        test_latch(a, b);
        test_barrier(a, b);
        test_permits(a);
        test_moves();
        test_cancel(a, b);
#ifdef DLOCK_HPP_STOP_TOKEN
        test_stop_token(a, b);
#endif
        test_multilock(a, b);
        test_redlock();
        test_election(a, b);
        test_async(a, b);
    } catch (const dlock::error &e) {
        std::printf("FAIL: unexpected dlock::error %s (%d): %s\n", dlock_errname(e.status()),
                    e.status(), e.what());
        return 1;
    }
    std::printf("%d checks, %d failed (C++ %ld)\n", checks, failures, static_cast<long>(__cplusplus));
    return failures ? 1 : 0;
}
