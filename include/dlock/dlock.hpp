/*
 * dlock for C++: RAII types over the C API of dlock.h, header-only (C++17 or
 * later; link with dlock as a C program does: dlock::dlock, or pkg-config dlock).
 *
 *   dlock::client c("redis://127.0.0.1:6379");
 *   dlock::mutex m(c, "orders:42");            // Redisson's RLock "orders:42"
 *   {
 *       std::unique_lock<dlock::mutex> g(m);   // lock(): waits, watchdog lease
 *       ...                                    // held; released at scope end
 *   }
 *   if (std::unique_lock<dlock::mutex> g(m, std::chrono::seconds(2)); g) ...
 *   dlock::semaphore s(c, "pool");            // Redisson's RSemaphore
 *   s.acquire(); ...; s.release();
 *
 * The types
 *   client            an open dlock_client (closed when the client and every
 *                     handle made from it are gone: handles share it)
 *   mutex, fair_mutex, fenced_mutex
 *                     Redisson's RLock, RFairLock, RFencedLock; Lockable and
 *                     TimedLockable: std::lock_guard, std::unique_lock,
 *                     std::scoped_lock, std::lock work
 *   shared_mutex      Redisson's RReadWriteLock, also SharedTimedLockable:
 *                     std::shared_lock takes the read side, std::unique_lock
 *                     the write side
 *   semaphore         as std::counting_semaphore: acquire, try_acquire,
 *                     try_acquire_for, try_acquire_until, release(n = 1)
 *   permit_semaphore  named, leased permits (acquire gives the permit's id)
 *   latch             as std::latch: count_down, try_wait, wait (and wait_for)
 *   multi_lock, red_lock
 *                     Redisson's RedissonMultiLock and RedissonRedLock over N
 *                     mutex objects; Lockable and TimedLockable
 *   election          leader election; Lockable and TimedLockable, so
 *                     std::unique_lock<dlock::election> is a term (campaign
 *                     in the constructor, resign in the destructor)
 *   cancel_token      ends waits from another thread (lock(token), ...);
 *                     under C++20 made from a std::stop_token
 * Asynchronous calls (lock_async, acquire_async, campaign_async, ...; see
 * include/dlock/async.h for the rules) take a callable fn(const
 * dlock::async_result &) run once on dlock's io thread, never a
 * std::future: a callback costs no thread and fits an event loop, as the C
 * API does, and a future is three lines away (docs/cpp.md), whereas a
 * future's only way back to a loop is a thread blocked in get(). fn must not
 * throw (it runs under a noexcept frame: a throw ends the program). A call
 * that is refused (a thread-owner handle, bad options) throws and fn never
 * runs.
 * Every type is move-only; the destructor frees the C handle (a lock handle's
 * holds stay held, as with dlock_lock_free: use a guard to release them).
 * native_handle() gives the C object for the calls not wrapped here.
 *
 * Errors. A call that fails throws dlock::error, a std::system_error whose
 * code() is the dlock status in dlock::category() (code().value() is the
 * negative dlock_status; status() gives it typed) and whose what() is
 * dlock_last_error()'s detailed message (then, as std::system_error words
 * it, ": " and dlock_strerror()). The calls of the hot path also have a
 * non-throwing overload taking a std::error_code& last (the std::filesystem
 * convention): lock, try_lock, try_lock_for, try_lock_until, unlock; the
 * semaphore's acquire, try_acquire*, release; the permit semaphore's
 * release; client::ping. It sets the code (cleared on success;
 * dlock_last_error() still holds the detail on the calling thread) and
 * returns false on failure. The other calls (queries, setup) throw, and
 * native_handle() reaches their C form, which returns the status. Constructors throw;
 * client::open(url, ec) is the non-throwing way to connect. A std::error_code
 * compares equal to the dlock_status enumerators (ec == DLOCK_ETIMEDOUT) and
 * to std::errc where one fits (timed_out, operation_canceled,
 * operation_not_permitted for DLOCK_ENOTOWNER, invalid_argument, ...).
 *   A wait that ends without the lock or permit (try_lock, try_lock_for, ...,
 *   try_acquire_*, latch::wait_for) is an answer, not an error: it returns
 *   false (and an error_code overload leaves the code clear).
 *   unlock() never throws, as the standard's BasicLockable asks (guards call
 *   it from destructors, where a throw would end the program); a release
 *   that fails (the lease ran out, the lock was lost, Redis unreachable) is
 *   reported by unlock(ec) and by release(), which throws (DLOCK_ENOTOWNER
 *   for a lock the caller does not hold: Redisson's
 *   IllegalMonitorStateException). A watchdog hold found gone is also
 *   reported to the lost callback (dlock_config_set_lost_callback).
 *
 * Threads and owners. A client and its handles may be used from any number of
 * threads at once, as in C; moving, assigning or destroying an object must be
 * the last call on it. A lock's owner is the calling OS thread (Redisson's
 * convention), so the thread that locks must be the one that unlocks; a
 * handle made with an explicit owner (dlock::owner{client.new_owner_id()},
 * dlock_lock_get_as) acts for that owner from whichever thread calls, for
 * work that moves between threads. Locks are reentrant per owner, as
 * Redisson's are: std::mutex's "lock twice deadlocks" does not apply.
 *
 * Durations are std::chrono durations, rounded up to milliseconds;
 * try_*_until takes any clock's time point and waits until then, measured
 * once when the call starts (the wait itself runs on dlock's monotonic clock).
 */
#ifndef DLOCK_DLOCK_HPP
#define DLOCK_DLOCK_HPP

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "dlock.hpp needs C++17 or later"
#endif

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#if __cplusplus >= 202002L && defined(__has_include)
#if __has_include(<stop_token>)
#include <stop_token>
#if defined(__cpp_lib_jthread)
#define DLOCK_HPP_STOP_TOKEN 1
#endif
#endif
#endif

#include <dlock/async.h>

namespace dlock {

/* ----------------------------------------------------------------- errors */

/* The error category of dlock statuses: message() is dlock_strerror(). */
class error_category_impl final : public std::error_category {
  public:
    const char *name() const noexcept override { return "dlock"; }
    std::string message(int code) const override { return dlock_strerror(code); }
    std::error_condition default_error_condition(int code) const noexcept override {
        switch (code) {
        case DLOCK_EINVAL: return std::errc::invalid_argument;
        case DLOCK_ENOMEM: return std::errc::not_enough_memory;
        case DLOCK_ETIMEDOUT: return std::errc::timed_out;
        case DLOCK_ENOTOWNER: return std::errc::operation_not_permitted;
        case DLOCK_ECANCELED: return std::errc::operation_canceled;
        case DLOCK_ECONN: return std::errc::connection_refused;
        case DLOCK_ENAMETOOLONG: return std::errc::filename_too_long;
        case DLOCK_EDEADLK: return std::errc::resource_deadlock_would_occur;
        case DLOCK_EREENTRY: return std::errc::resource_deadlock_would_occur;
        case DLOCK_ENOTFOUND: return std::errc::no_such_file_or_directory;
        default: return std::error_condition(code, *this);
        }
    }
};

/* The one instance of the category (std::error_code compares categories by
 * address). */
inline const std::error_category &category() noexcept {
    static const error_category_impl cat;
    return cat;
}

inline std::error_code make_error_code(dlock_status s) noexcept {
    return std::error_code(static_cast<int>(s), category());
}

/* What every throwing call throws: the dlock status and the detailed message
 * of the failed call (dlock_last_error() at the time). */
class error : public std::system_error {
  public:
    error(int status, const char *message)
        : std::system_error(status, category(), message ? message : "") {}
    explicit error(int status) : error(status, dlock_last_error()) {}
    dlock_status status() const noexcept { return static_cast<dlock_status>(code().value()); }
};

namespace detail {
// DLOCK_WATCHDOG and DLOCK_WAIT_FOREVER, without their C casts (which
// -Wold-style-cast would flag in a user's build).
constexpr int64_t watchdog_ms = 0;
constexpr int64_t forever_ms = -1;

inline void check(int rc) {
    if (rc != DLOCK_OK)
        throw error(rc);
}
// Sets ec from rc; true on DLOCK_OK.
inline bool set(std::error_code &ec, int rc) noexcept {
    if (rc == DLOCK_OK)
        ec.clear();
    else
        ec.assign(rc, category());
    return rc == DLOCK_OK;
}
template <class Rep, class Period>
int64_t to_ms(const std::chrono::duration<Rep, Period> &d) {
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
    return ms < 0 ? 0 : static_cast<int64_t>(ms);
}
template <class Clock, class Duration>
int64_t until_ms(const std::chrono::time_point<Clock, Duration> &t) {
    return to_ms(t - Clock::now());
}
// A wait as the C API takes it: a negative duration (dlock::wait_forever) is
// DLOCK_WAIT_FOREVER.
inline int64_t wait_ms(std::chrono::milliseconds d) noexcept {
    return d.count() < 0 ? forever_ms : static_cast<int64_t>(d.count());
}
inline dlock_wait_opts opts(int64_t wait, int64_t lease, dlock_cancel *cancel,
                            uint64_t *token = nullptr) noexcept {
    dlock_wait_opts o{};
    o.wait_ms = wait;
    o.lease_ms = lease;
    o.cancel = cancel;
    o.token = token;
    return o;
}
// The answer of a wait: true when it got what it waited for, false when the
// wait ran out (DLOCK_ETIMEDOUT); any other status throws (DLOCK_ECANCELED
// included: a cancelled wait is an error, as std::errc::operation_canceled).
inline bool answer(int rc) {
    if (rc == DLOCK_ETIMEDOUT)
        return false;
    check(rc);
    return true;
}
inline bool answer(int rc, std::error_code &ec) noexcept {
    set(ec, rc == DLOCK_ETIMEDOUT ? DLOCK_OK : rc);
    return rc == DLOCK_OK;
}
}  // namespace detail

/* A wait with no limit, for the calls that take a std::chrono::milliseconds
 * wait (the asynchronous ones, election::await_change, lock_fenced). */
inline constexpr std::chrono::milliseconds wait_forever{-1};

/* ----------------------------------------------------------------- config */

/* A dlock_config (every option at its default; see dlock_config_new). The
 * setters return *this and throw dlock::error on a bad value; for the options
 * not wrapped here call the C setter on native_handle(). Not thread-safe,
 * as in C: build it in one thread. */
class config {
  public:
    config() : cfg_(dlock_config_new(), &dlock_config_free) {
        if (!cfg_)
            throw error(DLOCK_ENOMEM, "out of memory");
    }
    explicit config(const std::string &url) : config() { this->url(url); }

    config &url(const std::string &u) { return set(dlock_config_set_url(get(), u.c_str())); }
    config &watchdog_timeout(std::chrono::milliseconds d) {
        return set(dlock_config_set_watchdog_timeout(get(), d.count()));
    }
    config &command_timeout(std::chrono::milliseconds d) {
        return set(dlock_config_set_command_timeout(get(), d.count()));
    }
    config &connect_timeout(std::chrono::milliseconds d) {
        return set(dlock_config_set_connect_timeout(get(), d.count()));
    }
    config &client_name(const std::string &n) {
        return set(dlock_config_set_client_name(get(), n.c_str()));
    }
    config &lost_callback(dlock_lost_fn fn, void *ud) {
        return set(dlock_config_set_lost_callback(get(), fn, ud));
    }
    /* The form with the cause of the loss as an argument
     * (dlock_config_set_lost_cause_callback; it replaces the other). */
    config &lost_callback(dlock_lost_cause_fn fn, void *ud) {
        return set(dlock_config_set_lost_cause_callback(get(), fn, ud));
    }
    /* Writer-first read-write locks for every shared_mutex of the client
     * (dlock_config_set_writer_first; off by default: Redisson's rules). */
    config &writer_first(bool on) { return set(dlock_config_set_writer_first(get(), on ? 1 : 0)); }
    /* The server clock check's allowance (dlock_config_set_clock_jump;
     * DLOCK_CLOCK_JUMP_OFF's -1 ms: not checked). A hold lost to a jump is
     * reported with cause DLOCK_CAUSE_CLOCK_JUMP. */
    config &clock_jump(std::chrono::milliseconds d) {
        return set(dlock_config_set_clock_jump(get(), d.count()));
    }

    dlock_config *native_handle() const noexcept { return cfg_.get(); }

  private:
    dlock_config *get() const noexcept { return cfg_.get(); }
    config &set(int rc) {
        detail::check(rc);
        return *this;
    }
    std::unique_ptr<dlock_config, void (*)(dlock_config *)> cfg_;
};

/* ----------------------------------------------------------------- client */

/* An explicit owner id for a handle (see dlock_lock_get_as): the handle acts
 * for it from any thread. Usually client::new_owner_id(). */
struct owner {
    std::string id;
};

/* An open client (dlock_client_open): connects in the constructor, closes
 * (dlock_client_close) when it and every handle made from it are destroyed.
 * Move-only; a moved-from client is empty (native_handle() == nullptr) and
 * may only be destroyed or assigned. Any thread may use it at once. */
class client {
  public:
    explicit client(const config &cfg) { detail::check(open_into(cfg, c_)); }
    explicit client(const std::string &url) : client(config(url)) {}
    explicit client(const char *url) : client(config(url)) {}

    /* The non-throwing form: an empty client (!c) with ec set on failure. */
    static client open(const config &cfg, std::error_code &ec) noexcept {
        client c;
        detail::set(ec, open_into(cfg, c.c_));
        return c;
    }
    static client open(const std::string &url, std::error_code &ec) noexcept {
        try {
            config cfg;
            if (!detail::set(ec, dlock_config_set_url(cfg.native_handle(), url.c_str())))
                return client();
            return open(cfg, ec);
        } catch (const error &e) {
            ec = e.code();
            return client();
        } catch (...) {
            ec = dlock::make_error_code(DLOCK_ENOMEM);
            return client();
        }
    }

    client(client &&) noexcept = default;
    client &operator=(client &&) noexcept = default;
    client(const client &) = delete;
    client &operator=(const client &) = delete;
    ~client() = default;

    explicit operator bool() const noexcept { return c_ != nullptr; }
    dlock_client *native_handle() const noexcept { return c_.get(); }

    /* The client's UUID, the first half of its owner ids. */
    std::string id() const { return dlock_client_id(c_.get()); }
    /* The calling thread's owner id, "<uuid>:<thread id>". */
    std::string owner_id() const {
        char buf[DLOCK_OWNER_BUFSIZE];
        detail::check(dlock_client_owner_id(c_.get(), buf, sizeof buf));
        return buf;
    }
    /* A fresh owner id no thread uses, for dlock::owner. */
    std::string new_owner_id() const {
        char buf[DLOCK_OWNER_BUFSIZE];
        detail::check(dlock_client_new_owner_id(c_.get(), buf, sizeof buf));
        return buf;
    }
    /* One PING round trip. */
    void ping() const { detail::check(dlock_client_ping(c_.get())); }
    bool ping(std::error_code &ec) const noexcept {
        return detail::set(ec, dlock_client_ping(c_.get()));
    }

    /* The shared pointer the handles keep (the client closes after the last). */
    const std::shared_ptr<dlock_client> &shared() const noexcept { return c_; }

  private:
    client() = default;
    static int open_into(const config &cfg, std::shared_ptr<dlock_client> &out) noexcept {
        dlock_client *c = nullptr;
        int rc = dlock_client_open(&c, cfg.native_handle());
        if (rc != DLOCK_OK)
            return rc;
        try {
            out.reset(c, &dlock_client_close);   // closes c itself when this throws
        } catch (...) {
            return DLOCK_ENOMEM;
        }
        return DLOCK_OK;
    }
    std::shared_ptr<dlock_client> c_;
};

/* The lease of a lock's holds: DLOCK_WATCHDOG (held while the client lives,
 * renewed by its watchdog; the default), or a fixed time after which the
 * hold expires by itself. */
inline constexpr std::chrono::milliseconds watchdog{detail::watchdog_ms};
/// Lease of a permit_semaphore's permit that never expires (DLOCK_NO_EXPIRY,
/// Redisson's leaseTime -1); only permit_semaphore's acquisitions take it.
inline constexpr std::chrono::milliseconds no_expiry{DLOCK_NO_EXPIRY};

namespace detail {
// A C handle and the client it came from (kept alive: the client closes last).
template <class T, void (*Free)(T *)>
class handle {
  public:
    handle() = default;
    handle(std::shared_ptr<dlock_client> c, T *h) noexcept : c_(std::move(c)), h_(h) {}
    handle(handle &&o) noexcept : c_(std::move(o.c_)), h_(std::exchange(o.h_, nullptr)) {}
    handle &operator=(handle &&o) noexcept {
        if (this != &o) {
            reset();
            c_ = std::move(o.c_);
            h_ = std::exchange(o.h_, nullptr);
        }
        return *this;
    }
    handle(const handle &) = delete;
    handle &operator=(const handle &) = delete;
    ~handle() { reset(); }
    T *get() const noexcept { return h_; }
    void reset() noexcept {
        if (h_)
            Free(h_);
        h_ = nullptr;
        c_.reset();   // after the handle: the client may close now
    }

  private:
    std::shared_ptr<dlock_client> c_;
    T *h_ = nullptr;
};

template <class T, void (*Free)(T *), class Get>
handle<T, Free> make(const client &c, Get get) {
    T *h = nullptr;
    check(get(c.native_handle(), &h));
    return handle<T, Free>(c.shared(), h);
}
}  // namespace detail

/* ------------------------------------------------------------ cancellation */

/* A cancellation token (dlock_cancel): fire() from any thread ends every wait
 * that carries it with DLOCK_ECANCELED (Redisson's lockInterruptibly), and
 * every later one until reset(). The waits that take one: lock(token),
 * try_lock_for(d, token), try_lock_until(t, token) of every mutex, multi_lock
 * and election; the semaphores' acquire and try_acquire_for; latch::wait and
 * wait_for; election::await_change; the asynchronous calls. A blocking wait
 * that is cancelled throws dlock::error (DLOCK_ECANCELED, equal to
 * std::errc::operation_canceled), or sets the error_code of its ec form; an
 * asynchronous one completes with that status.
 * Copies share one token (copy it into the thread that fires it); the C
 * token is freed with the last copy, and an asynchronous call keeps a copy
 * until its callback has run. Under C++20, cancel_token(std::stop_token)
 * fires the token when stop is requested (std::jthread's request_stop(),
 * a std::stop_source), for as long as the token lives. All calls: any
 * thread. */
class cancel_token {
  public:
    cancel_token() : s_(std::make_shared<state>()) {}
#ifdef DLOCK_HPP_STOP_TOKEN
    /* Fired when st's stop is requested (at once when it already was). */
    explicit cancel_token(const std::stop_token &st) : cancel_token() {
        s_->stop.emplace(st, fire_fn{s_->c});
    }
#endif

    void fire() const noexcept { dlock_cancel_fire(s_->c); }
    void reset() const noexcept { dlock_cancel_reset(s_->c); }
    bool fired() const noexcept { return dlock_cancel_fired(s_->c) != 0; }

    dlock_cancel *native_handle() const noexcept { return s_->c; }
    /* What an asynchronous call keeps alive until its callback. */
    std::shared_ptr<void> keep_alive() const noexcept { return s_; }

  private:
    struct fire_fn {
        dlock_cancel *c;
        void operator()() const noexcept { dlock_cancel_fire(c); }
    };
    struct state {
        state() { detail::check(dlock_cancel_new(&c)); }
        state(const state &) = delete;
        state &operator=(const state &) = delete;
        ~state() {
#ifdef DLOCK_HPP_STOP_TOKEN
            stop.reset();   // first: a stop callback running now finishes here
#endif
            dlock_cancel_free(c);
        }
        dlock_cancel *c = nullptr;
#ifdef DLOCK_HPP_STOP_TOKEN
        std::optional<std::stop_callback<fire_fn>> stop;
#endif
    };
    std::shared_ptr<state> s_;
};

/* ------------------------------------------------------------ asynchronous */

/* The outcome of an asynchronous call (include/dlock/async.h), copied out of
 * the C result so that it outlives the callback. status is clear on
 * DLOCK_OK, else the dlock status (compare it with DLOCK_ETIMEDOUT, ...), and
 * message its detail. The other fields are those the call answers, as
 * dlock_async_token/flag/count/permit_id/text say: a fenced acquisition's
 * token or an election's term (token), a yes/no (flag), a count, an
 * acquired permit's id, the leader's "host pid owner" (text). */
struct async_result {
    std::error_code status;
    std::string message;
    uint64_t token = 0;
    bool flag = false;
    int64_t count = -1;
    std::string permit_id;
    std::string text;

    explicit operator bool() const noexcept { return !status; }
};

namespace detail {
// One pending asynchronous call: the caller's callable and what must live
// until it has run (a cancel token).
template <class F>
struct async_op {
    F fn;
    std::shared_ptr<void> keep;
};

template <class F>
void async_done(const dlock_async_result *r, void *ud) noexcept {
    std::unique_ptr<async_op<F>> op(static_cast<async_op<F> *>(ud));
    async_result res;
    int rc = dlock_async_status(r);
    if (rc != DLOCK_OK)
        res.status.assign(rc, category());
    res.message = dlock_async_message(r);
    res.token = dlock_async_token(r);
    res.flag = dlock_async_flag(r) != 0;
    res.count = dlock_async_count(r);
    res.permit_id = dlock_async_permit_id(r);
    res.text = dlock_async_text(r);
    op->fn(static_cast<const async_result &>(res));
}

// Starts an asynchronous call: start(c_callback, ud) is the C call. Throws
// dlock::error when the call is refused (then fn never runs).
template <class F, class Start>
void start_async(F &&fn, std::shared_ptr<void> keep, Start start) {
    using op_t = async_op<std::decay_t<F>>;
    auto op = std::make_unique<op_t>(op_t{std::forward<F>(fn), std::move(keep)});
    check(start(&async_done<std::decay_t<F>>, static_cast<void *>(op.get())));
    op.release();   // async_done owns it now
}

// An asynchronous wait: the options (with the token's C handle) and the
// token kept alive until the callback.
template <class F, class Start>
void start_wait_async(std::chrono::milliseconds wait, int64_t lease, const cancel_token *t, F &&fn,
                      Start start) {
    dlock_wait_opts o = opts(wait_ms(wait), lease, t ? t->native_handle() : nullptr);
    start_async(std::forward<F>(fn), t ? t->keep_alive() : nullptr,
                [&](dlock_async_fn cb, void *ud) { return start(&o, cb, ud); });
}

/* What every lock-like type (mutexes, multi_lock, red_lock, election)
 * offers from its C calls (acquire with options, release, and their
 * asynchronous forms on a T) and two members of D: native_handle() (the T)
 * and lease_rc() (the lease its acquisitions take). Lockable and
 * TimedLockable, with the error_code and cancel_token overloads, and the
 * asynchronous pair. */
template <class D, class T, int (*Acquire)(T *, const dlock_wait_opts *), int (*Release)(T *),
          int (*AcquireAsync)(T *, const dlock_wait_opts *, dlock_async_fn, void *),
          int (*ReleaseAsync)(T *, dlock_async_fn, void *)>
class lockable {
  public:
    /* Waits as long as it takes. */
    void lock() { check(acquire_rc(forever_ms, nullptr)); }
    bool lock(std::error_code &ec) noexcept { return set(ec, acquire_rc(forever_ms, nullptr)); }
    /* Waits until taken or t fires (then DLOCK_ECANCELED). */
    void lock(const cancel_token &t) { check(acquire_rc(forever_ms, t.native_handle())); }
    bool lock(const cancel_token &t, std::error_code &ec) noexcept {
        return set(ec, acquire_rc(forever_ms, t.native_handle()));
    }

    /* One attempt: true when taken, false when held by another owner. */
    bool try_lock() { return answer(acquire_rc(0, nullptr)); }
    bool try_lock(std::error_code &ec) noexcept { return answer(acquire_rc(0, nullptr), ec); }

    /* Waits up to d (Redisson's tryLock(wait, lease)): false when still
     * held elsewhere then. */
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period> &d) {
        return answer(acquire_rc(to_ms(d), nullptr));
    }
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period> &d, std::error_code &ec) noexcept {
        return answer(acquire_rc(to_ms(d), nullptr), ec);
    }
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period> &d, const cancel_token &t) {
        return answer(acquire_rc(to_ms(d), t.native_handle()));
    }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t) {
        return answer(acquire_rc(until_ms(t), nullptr));
    }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t,
                        std::error_code &ec) noexcept {
        return answer(acquire_rc(until_ms(t), nullptr), ec);
    }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t,
                        const cancel_token &tok) {
        return answer(acquire_rc(until_ms(t), tok.native_handle()));
    }

    /* Releases one hold; never throws (see the top of this file): a failure
     * is lost here, use unlock(ec) or release() to see it. */
    void unlock() noexcept { (void)release_rc(); }
    bool unlock(std::error_code &ec) noexcept { return set(ec, release_rc()); }
    /* Releases one hold and throws on failure: DLOCK_ENOTOWNER when the
     * caller holds nothing (never held, released, expired, lost). */
    void release() { check(release_rc()); }

    /* Asynchronously (include/dlock/async.h): waits up to wait
     * (dlock::wait_forever: no limit; 0: one attempt) and calls fn(const
     * dlock::async_result &) once, on dlock's io thread, with the outcome
     * (status DLOCK_OK, DLOCK_ETIMEDOUT, DLOCK_ECANCELED, ...). Locks need
     * handles with an explicit owner (the constructors taking
     * dlock::owner): otherwise, or for bad options, the call throws and fn
     * never runs. The object must live until fn has run; a token is kept
     * alive by the call. */
    template <class F>
    void lock_async(std::chrono::milliseconds wait, F &&fn) {
        lock_async_impl(wait, nullptr, std::forward<F>(fn));
    }
    template <class F>
    void lock_async(std::chrono::milliseconds wait, const cancel_token &t, F &&fn) {
        lock_async_impl(wait, &t, std::forward<F>(fn));
    }
    /* Releases one hold asynchronously: fn gets DLOCK_OK, DLOCK_ENOTOWNER,
     * or a connection error. */
    template <class F>
    void unlock_async(F &&fn) {
        start_async(std::forward<F>(fn), nullptr, [this](dlock_async_fn cb, void *ud) {
            return ReleaseAsync(self().native_handle(), cb, ud);
        });
    }

  protected:
    lockable() = default;

  private:
    D &self() noexcept { return static_cast<D &>(*this); }
    int acquire_rc(int64_t wait_ms, dlock_cancel *cancel) noexcept {
        dlock_wait_opts o = opts(wait_ms, self().lease_rc(), cancel);
        return Acquire(self().native_handle(), &o);
    }
    int release_rc() noexcept { return Release(self().native_handle()); }
    template <class F>
    void lock_async_impl(std::chrono::milliseconds wait, const cancel_token *t, F &&fn) {
        start_wait_async(wait, self().lease_rc(), t, std::forward<F>(fn),
                         [this](const dlock_wait_opts *o, dlock_async_fn cb, void *ud) {
                             return AcquireAsync(self().native_handle(), o, cb, ud);
                         });
    }
};
}  // namespace detail

/* ------------------------------------------------------------------- locks */

/* What mutex, fair_mutex, fenced_mutex and the sides of shared_mutex share:
 * one dlock_lock handle and the lease its acquisitions take. Lockable and
 * TimedLockable. */
class basic_mutex
    : public detail::lockable<basic_mutex, dlock_lock, &dlock_lock_acquire_opts, &dlock_lock_release,
                              &dlock_lock_acquire_async, &dlock_lock_release_async> {
  public:
    /* lock(), try_lock(), try_lock_for(), try_lock_until(), unlock(),
     * release() and their error_code and cancel_token forms, lock_async and
     * unlock_async: see detail::lockable. lock() is Redisson's lock(lease),
     * try_lock_for its tryLock(wait, lease), lock(token) its
     * lockInterruptibly, lock_async its lockAsync. */

    /* Takes the lock with a fencing token (waiting up to wait, or forever by
     * default) and returns the token; 0 when the wait ended first. */
    uint64_t lock_fenced(std::chrono::milliseconds wait = wait_forever) {
        uint64_t token = 0;
        dlock_wait_opts o = detail::opts(detail::wait_ms(wait), lease_ms_, nullptr, &token);
        return detail::answer(dlock_lock_acquire_opts(get(), &o)) ? token : 0;
    }

    /* Deletes the lock whoever holds it (Redisson's forceUnlock); true when
     * something was deleted. */
    bool force_unlock() {
        int was = 0;
        detail::check(dlock_lock_force_release(get(), &was));
        return was != 0;
    }
    /* Hands this handle's owner's whole hold to the owner id `to` in one
     * script: nobody else can take the lock in between, no waiter wakes
     * (dlock_lock_transfer). Reentrant locks (mutex, fenced, spin,
     * non-reentrant); a fair or shared_mutex side throws DLOCK_EINVAL. */
    void transfer(const std::string &to) { detail::check(dlock_lock_transfer(get(), to.c_str())); }
    /* Adopts a hold handed to this handle's owner (dlock::owner{id}): its
     * TTL becomes this object's lease, and with dlock::watchdog its client's
     * watchdog renews it from now on (dlock_lock_adopt). Returns the hold
     * count taken over: that many unlock() free it. */
    int64_t adopt() {
        int64_t n = 0;
        detail::check(dlock_lock_adopt(get(), lease_ms_, &n));
        return n;
    }
    /* Revocation on request (dlock_lock_set_revoke_handler): fn(name,
     * owner, note) runs on dlock's io thread, once per request that asks a
     * hold of this handle's owner to let go; it should return quickly and
     * may unlock an explicit-owner handle, or tell the thread that holds.
     * An exception it throws is dropped. An empty fn: none. Setting one
     * replaces the last (which is not running once this returns). */
    using revoke_handler =
        std::function<void(const std::string &name, const std::string &owner, const std::string &note)>;
    void on_revoke(revoke_handler fn) {
        detail::check(dlock_lock_set_revoke_handler(get(), nullptr, nullptr));
        revoke_fn_.reset();
        if (!fn)
            return;
        revoke_fn_ = std::make_unique<revoke_handler>(std::move(fn));
        detail::check(dlock_lock_set_revoke_handler(get(), &revoke_trampoline, revoke_fn_.get()));
    }
    /* Asks the holders to let it go (dlock_lock_request_revoke): holders 0
     * when it was free; listeners 0 with holders > 0: nobody listening. */
    dlock_revoke_answer request_revoke(const std::string &note = {}) {
        dlock_revoke_answer a{0, 0};
        detail::check(dlock_lock_request_revoke(get(), note.c_str(), &a));
        return a;
    }
    /* The same asynchronously: fn(const dlock::async_result &) with flag =
     * held, count = listeners. Any handle; the note is copied. */
    template <class F>
    void request_revoke_async(const std::string &note, F &&fn) {
        detail::start_async(std::forward<F>(fn), nullptr, [&](dlock_async_fn cb, void *ud) {
            return dlock_lock_request_revoke_async(get(), note.c_str(), cb, ud);
        });
    }

    /* Whether any owner holds it; whether this handle's owner does; its
     * hold count; the lock's TTL (-2 absent, -1 none). */
    bool is_locked() const { return flag(&dlock_lock_is_locked); }
    bool is_held() const { return flag(&dlock_lock_is_held); }
    int64_t hold_count() const {
        int64_t n = 0;
        detail::check(dlock_lock_hold_count(get(), &n));
        return n;
    }
    std::chrono::milliseconds ttl() const {
        int64_t t = 0;
        detail::check(dlock_lock_ttl(get(), &t));
        return std::chrono::milliseconds(t);
    }
    /* The last fencing token given for the name (Redisson's getToken). */
    uint64_t token() const {
        uint64_t t = 0;
        detail::check(dlock_lock_get_token(get(), &t));
        return t;
    }

    std::string name() const { return dlock_lock_name(get()); }
    std::chrono::milliseconds lease() const noexcept { return std::chrono::milliseconds(lease_ms_); }
    dlock_lock *native_handle() const noexcept { return h_.get(); }
    explicit operator bool() const noexcept { return h_.get() != nullptr; }

  protected:
    using handle_t = detail::handle<dlock_lock, &dlock_lock_free>;
    basic_mutex() = default;
    basic_mutex(basic_mutex &&) noexcept = default;
    // The handle first: its free stops the revoke handler before it goes.
    basic_mutex &operator=(basic_mutex &&o) noexcept {
        h_ = std::move(o.h_);
        revoke_fn_ = std::move(o.revoke_fn_);
        lease_ms_ = o.lease_ms_;
        return *this;
    }
    basic_mutex(handle_t h, std::chrono::milliseconds lease) : h_(std::move(h)), lease_ms_(lease.count()) {
        if (lease_ms_ < 0)
            throw error(DLOCK_EINVAL, "lease: negative (dlock::watchdog or a positive lease)");
    }
    // get(c, name, out) or get_as(c, name, owner, out), as the owner asks.
    template <class Get, class GetAs>
    static handle_t make(const client &c, const std::string &name, const owner *o, Get g, GetAs ga) {
        return detail::make<dlock_lock, &dlock_lock_free>(c, [&](dlock_client *cc, dlock_lock **out) {
            return o ? ga(cc, name.c_str(), o->id.c_str(), out) : g(cc, name.c_str(), out);
        });
    }

  private:
    friend lockable;
    dlock_lock *get() const noexcept { return h_.get(); }
    int64_t lease_rc() const noexcept { return lease_ms_; }
    bool flag(int (*fn)(dlock_lock *, int *)) const {
        int v = 0;
        detail::check(fn(get(), &v));
        return v != 0;
    }

    static void revoke_trampoline(const char *name, const char *owner, const char *note,
                                  void *ud) noexcept {
        try {
            (*static_cast<revoke_handler *>(ud))(name, owner, note);
        } catch (...) {
        }
    }

    // Before h_: the handle (whose free stops the handler) goes first.
    std::unique_ptr<revoke_handler> revoke_fn_;
    handle_t h_;
    int64_t lease_ms_ = detail::watchdog_ms;
};

/* A reentrant lock, Redisson's RLock (dlock_lock_get; dlock_lock_get_as with
 * an owner). lease: dlock::watchdog (the default) or a fixed lease for every
 * acquisition through this object. */
class mutex : public basic_mutex {
  public:
    mutex(const client &c, const std::string &name, std::chrono::milliseconds lease = watchdog)
        : basic_mutex(make(c, name, nullptr, &dlock_lock_get, &dlock_lock_get_as), lease) {}
    mutex(const client &c, const std::string &name, const owner &o,
         std::chrono::milliseconds lease = watchdog)
        : basic_mutex(make(c, name, &o, &dlock_lock_get, &dlock_lock_get_as), lease) {}
};

/* A fair lock, Redisson's RFairLock (dlock_fair_lock_get): waiters take turns
 * in arrival order across processes. */
class fair_mutex : public basic_mutex {
  public:
    fair_mutex(const client &c, const std::string &name, std::chrono::milliseconds lease = watchdog)
        : basic_mutex(make(c, name, nullptr, &dlock_fair_lock_get, &dlock_fair_lock_get_as), lease) {}
    fair_mutex(const client &c, const std::string &name, const owner &o,
              std::chrono::milliseconds lease = watchdog)
        : basic_mutex(make(c, name, &o, &dlock_fair_lock_get, &dlock_fair_lock_get_as), lease) {}
};

/* A non-reentrant lock, Redisson's getNonReentrantLock
 * (dlock_nonreentrant_lock_get): a second lock() or try_lock*() by the owner
 * that holds it throws dlock::error DLOCK_EREENTRY (std::errc::
 * resource_deadlock_would_occur), as std::mutex may not be locked twice by
 * one thread; the hold is kept. */
class nonreentrant_mutex : public basic_mutex {
  public:
    nonreentrant_mutex(const client &c, const std::string &name,
                       std::chrono::milliseconds lease = watchdog)
        : basic_mutex(make(c, name, nullptr, &dlock_nonreentrant_lock_get,
                           &dlock_nonreentrant_lock_get_as),
                      lease) {}
    nonreentrant_mutex(const client &c, const std::string &name, const owner &o,
                       std::chrono::milliseconds lease = watchdog)
        : basic_mutex(make(c, name, &o, &dlock_nonreentrant_lock_get,
                           &dlock_nonreentrant_lock_get_as),
                      lease) {}
};

/* A non-reentrant fair lock (dlock_nonreentrant_fair_lock_get): fair_mutex's
 * order, nonreentrant_mutex's refusal. */
class nonreentrant_fair_mutex : public basic_mutex {
  public:
    nonreentrant_fair_mutex(const client &c, const std::string &name,
                            std::chrono::milliseconds lease = watchdog)
        : basic_mutex(make(c, name, nullptr, &dlock_nonreentrant_fair_lock_get,
                           &dlock_nonreentrant_fair_lock_get_as),
                      lease) {}
    nonreentrant_fair_mutex(const client &c, const std::string &name, const owner &o,
                            std::chrono::milliseconds lease = watchdog)
        : basic_mutex(make(c, name, &o, &dlock_nonreentrant_fair_lock_get,
                           &dlock_nonreentrant_fair_lock_get_as),
                      lease) {}
};

/* A spin lock, Redisson's getSpinLock (dlock_spin_lock_get): the mutex's
 * layout and reentrancy, waits that subscribe to nothing and try again on a
 * back-off (Redisson's default: 1 ms doubling to 128 ms; set_backoff). */
class spin_mutex : public basic_mutex {
  public:
    spin_mutex(const client &c, const std::string &name, std::chrono::milliseconds lease = watchdog)
        : basic_mutex(make(c, name, nullptr, &dlock_spin_lock_get, &dlock_spin_lock_get_as),
                      lease) {}
    spin_mutex(const client &c, const std::string &name, const owner &o,
               std::chrono::milliseconds lease = watchdog)
        : basic_mutex(make(c, name, &o, &dlock_spin_lock_get, &dlock_spin_lock_get_as), lease) {}
    /* The back-off of later waits (dlock_lock_set_backoff): the first sleep,
     * its ceiling, the multiplier between them. Throws dlock::error
     * DLOCK_EINVAL for a value out of range. */
    void set_backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max,
                     int multiplier = 2) {
        dlock_backoff b{static_cast<int64_t>(initial.count()), static_cast<int64_t>(max.count()),
                        multiplier};
        detail::check(dlock_lock_set_backoff(native_handle(), &b));
    }
};

/* A fenced lock, Redisson's RFencedLock (dlock_fenced_lock_get): every
 * acquisition raises the fencing token; read it with token() while held. */
class fenced_mutex : public basic_mutex {
  public:
    fenced_mutex(const client &c, const std::string &name, std::chrono::milliseconds lease = watchdog)
        : basic_mutex(make(c, name, nullptr, &dlock_fenced_lock_get, &dlock_fenced_lock_get_as),
                     lease) {}
    fenced_mutex(const client &c, const std::string &name, const owner &o,
                std::chrono::milliseconds lease = watchdog)
        : basic_mutex(make(c, name, &o, &dlock_fenced_lock_get, &dlock_fenced_lock_get_as), lease) {}
};

/* A read-write lock, Redisson's RReadWriteLock: read() and write() are its two
 * sides, each a basic_mutex. The object itself is SharedTimedLockable, like
 * std::shared_timed_mutex: lock()/try_lock*()/unlock() take the write side,
 * lock_shared()/try_lock_shared*()/unlock_shared() the read side, so
 * std::unique_lock and std::shared_lock work. A reader asking for the write
 * side gets DLOCK_EDEADLK (dlock_write_lock_get). set_writer_first(true)
 * keeps new readers behind a waiting writer (dlock_lock_set_writer_first). */
class shared_mutex {
  public:
    shared_mutex(const client &c, const std::string &name,
                    std::chrono::milliseconds lease = watchdog)
        : r_(c, name, nullptr, lease, true), w_(c, name, nullptr, lease, false) {}
    shared_mutex(const client &c, const std::string &name, const owner &o,
                    std::chrono::milliseconds lease = watchdog)
        : r_(c, name, &o, lease, true), w_(c, name, &o, lease, false) {}

    basic_mutex &read() noexcept { return r_; }
    basic_mutex &write() noexcept { return w_; }

    /* Writer-first on both sides (dlock_lock_set_writer_first; by default
     * the client's setting): once this write side waits, new readers of
     * writer-first handles of the name queue behind it; readers that hold
     * keep holding and may re-enter. */
    void set_writer_first(bool on) {
        detail::check(dlock_lock_set_writer_first(r_.native_handle(), on ? 1 : 0));
        detail::check(dlock_lock_set_writer_first(w_.native_handle(), on ? 1 : 0));
    }

    void lock() { w_.lock(); }
    bool try_lock() { return w_.try_lock(); }
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period> &d) { return w_.try_lock_for(d); }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t) {
        return w_.try_lock_until(t);
    }
    void unlock() noexcept { w_.unlock(); }

    void lock_shared() { r_.lock(); }
    bool try_lock_shared() { return r_.try_lock(); }
    template <class Rep, class Period>
    bool try_lock_shared_for(const std::chrono::duration<Rep, Period> &d) {
        return r_.try_lock_for(d);
    }
    template <class Clock, class Duration>
    bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration> &t) {
        return r_.try_lock_until(t);
    }
    void unlock_shared() noexcept { r_.unlock(); }

  private:
    class side : public basic_mutex {
      public:
        side(const client &c, const std::string &name, const owner *o,
             std::chrono::milliseconds lease, bool read)
            : basic_mutex(read ? make(c, name, o, &dlock_read_lock_get, &dlock_read_lock_get_as)
                              : make(c, name, o, &dlock_write_lock_get, &dlock_write_lock_get_as),
                         lease) {}
    };
    side r_, w_;
};

/* -------------------------------------------------------------- semaphores */

/* A counting semaphore, Redisson's RSemaphore (dlock_semaphore_get), used as
 * std::counting_semaphore is. Permits belong to nobody: any thread or process
 * may release them. Set the count first (try_set_permits or set_permits): a
 * semaphore that does not exist has no permits. */
class semaphore {
  public:
    semaphore(const client &c, const std::string &name)
        : h_(detail::make<dlock_semaphore, &dlock_semaphore_free>(
              c, [&](dlock_client *cc, dlock_semaphore **out) {
                  return dlock_semaphore_get(cc, name.c_str(), out);
              })) {}

    /* Takes n permits, waiting as long as it takes. */
    void acquire(std::ptrdiff_t n = 1) { detail::check(dlock_semaphore_acquire(get(), n)); }
    bool acquire(std::ptrdiff_t n, std::error_code &ec) noexcept {
        return detail::set(ec, dlock_semaphore_acquire(get(), n));
    }
    /* One try for n permits: false when fewer are available. */
    bool try_acquire(std::ptrdiff_t n = 1) { return attempt(n, 0); }
    bool try_acquire(std::ptrdiff_t n, std::error_code &ec) noexcept { return attempt(n, 0, ec); }
    template <class Rep, class Period>
    bool try_acquire_for(const std::chrono::duration<Rep, Period> &d, std::ptrdiff_t n = 1) {
        return attempt(n, detail::to_ms(d));
    }
    template <class Rep, class Period>
    bool try_acquire_for(const std::chrono::duration<Rep, Period> &d, std::ptrdiff_t n,
                         std::error_code &ec) noexcept {
        return attempt(n, detail::to_ms(d), ec);
    }
    template <class Clock, class Duration>
    bool try_acquire_until(const std::chrono::time_point<Clock, Duration> &t, std::ptrdiff_t n = 1) {
        return attempt(n, detail::until_ms(t));
    }
    template <class Clock, class Duration>
    bool try_acquire_until(const std::chrono::time_point<Clock, Duration> &t, std::ptrdiff_t n,
                           std::error_code &ec) noexcept {
        return attempt(n, detail::until_ms(t), ec);
    }
    /* With a cancel token: acquire throws DLOCK_ECANCELED, try_acquire_for
     * too, when t fires during the wait. */
    void acquire(std::ptrdiff_t n, const cancel_token &t) {
        detail::check(attempt_rc(n, detail::forever_ms, t.native_handle()));
    }
    template <class Rep, class Period>
    bool try_acquire_for(const std::chrono::duration<Rep, Period> &d, std::ptrdiff_t n,
                         const cancel_token &t) {
        return detail::answer(attempt_rc(n, detail::to_ms(d), t.native_handle()));
    }
    /* Asynchronously (dlock_semaphore_acquire_async): n permits within wait
     * (dlock::wait_forever, 0: one try); fn(const dlock::async_result &) runs
     * once on dlock's io thread. Throws (fn never runs) when refused. */
    template <class F>
    void acquire_async(std::ptrdiff_t n, std::chrono::milliseconds wait, F &&fn) {
        acquire_async_impl(n, wait, nullptr, std::forward<F>(fn));
    }
    template <class F>
    void acquire_async(std::ptrdiff_t n, std::chrono::milliseconds wait, const cancel_token &t,
                       F &&fn) {
        acquire_async_impl(n, wait, &t, std::forward<F>(fn));
    }
    template <class F>
    void release_async(std::ptrdiff_t n, F &&fn) {
        detail::start_async(std::forward<F>(fn), nullptr, [&](dlock_async_fn cb, void *ud) {
            return dlock_semaphore_release_async(get(), n, cb, ud);
        });
    }

    /* Gives n permits back (whoever took them). */
    void release(std::ptrdiff_t n = 1) { detail::check(dlock_semaphore_release(get(), n)); }
    bool release(std::ptrdiff_t n, std::error_code &ec) noexcept {
        return detail::set(ec, dlock_semaphore_release(get(), n));
    }

    /* The permits available now (negative after some were taken away). */
    int64_t available() const {
        int64_t n = 0;
        detail::check(dlock_semaphore_available(get(), &n));
        return n;
    }
    /* Sets the count only when the semaphore does not exist; true when set. */
    bool try_set_permits(int64_t n) {
        int set = 0;
        detail::check(dlock_semaphore_try_set_permits(get(), n, &set));
        return set != 0;
    }
    void set_permits(int64_t n) { detail::check(dlock_semaphore_set_permits(get(), n)); }
    void add_permits(int64_t delta) { detail::check(dlock_semaphore_add_permits(get(), delta)); }
    /* Takes every available permit; returns how many there were. */
    int64_t drain() {
        int64_t n = 0;
        detail::check(dlock_semaphore_drain(get(), &n));
        return n;
    }

    std::string name() const { return dlock_semaphore_name(get()); }
    dlock_semaphore *native_handle() const noexcept { return h_.get(); }

  private:
    dlock_semaphore *get() const noexcept { return h_.get(); }
    int attempt_rc(std::ptrdiff_t n, int64_t wait_ms, dlock_cancel *cancel) noexcept {
        dlock_wait_opts o = detail::opts(wait_ms, 0, cancel);
        return dlock_semaphore_acquire_opts(get(), n, &o);
    }
    bool attempt(std::ptrdiff_t n, int64_t wait_ms) {
        return detail::answer(attempt_rc(n, wait_ms, nullptr));
    }
    bool attempt(std::ptrdiff_t n, int64_t wait_ms, std::error_code &ec) noexcept {
        return detail::answer(attempt_rc(n, wait_ms, nullptr), ec);
    }
    template <class F>
    void acquire_async_impl(std::ptrdiff_t n, std::chrono::milliseconds wait, const cancel_token *t,
                            F &&fn) {
        detail::start_wait_async(wait, 0, t, std::forward<F>(fn),
                                 [&](const dlock_wait_opts *o, dlock_async_fn cb, void *ud) {
                                     return dlock_semaphore_acquire_async(get(), n, o, cb, ud);
                                 });
    }
    detail::handle<dlock_semaphore, &dlock_semaphore_free> h_;
};

/* A semaphore of named, leased permits, Redisson's RPermitExpirableSemaphore
 * (dlock_permit_semaphore_get). acquire gives the permit's id, which any
 * thread or process may release; a permit whose lease ends comes back by
 * itself (lease dlock::watchdog: renewed while the client lives). */
class permit_semaphore {
  public:
    permit_semaphore(const client &c, const std::string &name)
        : h_(detail::make<dlock_permit_semaphore, &dlock_permit_semaphore_free>(
              c, [&](dlock_client *cc, dlock_permit_semaphore **out) {
                  return dlock_permit_semaphore_get(cc, name.c_str(), out);
              })) {}

    /* Takes one permit, waiting as long as it takes; returns its id. */
    std::string acquire(std::chrono::milliseconds lease = watchdog) {
        char id[DLOCK_PERMIT_ID_BUFSIZE];
        detail::check(dlock_permit_semaphore_acquire(get(), lease.count(), id, sizeof id));
        return id;
    }
    /* Waits up to d for a permit: its id, or "" when none came. */
    template <class Rep, class Period>
    std::string try_acquire_for(const std::chrono::duration<Rep, Period> &d,
                                std::chrono::milliseconds lease = watchdog) {
        char id[DLOCK_PERMIT_ID_BUFSIZE];
        int rc = dlock_permit_semaphore_try(get(), detail::to_ms(d), lease.count(), id, sizeof id);
        if (rc == DLOCK_ETIMEDOUT)
            return std::string();
        detail::check(rc);
        return id;
    }
    std::string try_acquire(std::chrono::milliseconds lease = watchdog) {
        return try_acquire_for(std::chrono::milliseconds(0), lease);
    }
    /* Waits up to wait (dlock::wait_forever: no limit) or until t fires
     * (throws DLOCK_ECANCELED): the permit's id, or "" when none came. */
    std::string try_acquire_for(std::chrono::milliseconds wait, std::chrono::milliseconds lease,
                                const cancel_token &t) {
        char id[DLOCK_PERMIT_ID_BUFSIZE];
        dlock_wait_opts o = detail::opts(detail::wait_ms(wait), lease.count(), t.native_handle());
        return detail::answer(dlock_permit_semaphore_acquire_opts(get(), &o, id, sizeof id))
                   ? std::string(id)
                   : std::string();
    }
    /* Asynchronously (dlock_permit_semaphore_acquire_async): the permit's id
     * comes in the result's permit_id. */
    template <class F>
    void acquire_async(std::chrono::milliseconds wait, std::chrono::milliseconds lease, F &&fn) {
        detail::start_wait_async(wait, lease.count(), nullptr, std::forward<F>(fn),
                                 [&](const dlock_wait_opts *o, dlock_async_fn cb, void *ud) {
                                     return dlock_permit_semaphore_acquire_async(get(), o, cb, ud);
                                 });
    }
    template <class F>
    void release_async(const std::string &id, F &&fn) {
        detail::start_async(std::forward<F>(fn), nullptr, [&](dlock_async_fn cb, void *ud) {
            return dlock_permit_semaphore_release_async(get(), id.c_str(), cb, ud);
        });
    }
    /* Gives permit id back: DLOCK_ENOTOWNER when no permit has it any more. */
    void release(const std::string &id) {
        detail::check(dlock_permit_semaphore_release(get(), id.c_str()));
    }
    bool release(const std::string &id, std::error_code &ec) noexcept {
        return detail::set(ec, dlock_permit_semaphore_release(get(), id.c_str()));
    }
    int64_t available() const {
        int64_t n = 0;
        detail::check(dlock_permit_semaphore_available(get(), &n, nullptr));
        return n;
    }
    bool try_set_permits(int64_t n) {
        int set = 0;
        detail::check(dlock_permit_semaphore_try_set_permits(get(), n, &set));
        return set != 0;
    }

    std::string name() const { return dlock_permit_semaphore_name(get()); }
    dlock_permit_semaphore *native_handle() const noexcept { return h_.get(); }

  private:
    dlock_permit_semaphore *get() const noexcept { return h_.get(); }
    detail::handle<dlock_permit_semaphore, &dlock_permit_semaphore_free> h_;
};

/* -------------------------------------------------------------- multi-lock */

/* Several locks taken as one (dlock_multilock_new: Redisson's
 * RedissonMultiLock, held when every lock is held), or a RedLock (red_lock:
 * RedissonRedLock, held when a majority is). Built over mutex objects (any
 * of mutex, fair_mutex, fenced_mutex, a shared_mutex's read() or write()),
 * on one client or several; they stay the caller's and must outlive the
 * multi-lock. Each lock is held for its own handle's owner, so the thread
 * that locks must unlock unless every handle has an explicit owner (which
 * the asynchronous calls require). lease: dlock::watchdog (the default) or
 * a fixed lease for every lock, whatever lease the mutex objects carry.
 * Lockable and TimedLockable (detail::lockable): lock() waits with nothing
 * held meanwhile (no deadlock whatever the order), try_lock_for(d) gives up
 * after d, lock(token) ends on cancellation; unlock() never throws,
 * release() does. Any number of threads may use one at once. */
class basic_multi_lock
    : public detail::lockable<basic_multi_lock, dlock_multilock, &dlock_multilock_acquire_opts,
                              &dlock_multilock_release, &dlock_multilock_acquire_async,
                              &dlock_multilock_release_async> {
  public:
    basic_multi_lock(basic_multi_lock &&) noexcept = default;
    basic_multi_lock &operator=(basic_multi_lock &&) noexcept = default;

    /* lock_async, unlock_async (dlock_multilock_acquire_async; explicit-owner
     * handles): fn runs once, on the io thread of one of the clients; the
     * multi-lock and its mutexes must live until then. */

    std::size_t size() const noexcept { return n_; }
    std::chrono::milliseconds lease() const noexcept { return std::chrono::milliseconds(lease_ms_); }
    dlock_multilock *native_handle() const noexcept { return ml_.get(); }

  protected:
    using new_fn = int (*)(dlock_lock *const *, std::size_t, dlock_multilock **);
    basic_multi_lock(const std::vector<std::reference_wrapper<basic_mutex>> &locks,
                     std::chrono::milliseconds lease, new_fn make)
        : ml_(nullptr, &dlock_multilock_free), n_(locks.size()), lease_ms_(lease.count()) {
        std::vector<dlock_lock *> hs;
        hs.reserve(locks.size());
        for (basic_mutex &m : locks)
            hs.push_back(m.native_handle());
        dlock_multilock *ml = nullptr;
        detail::check(make(hs.data(), hs.size(), &ml));
        ml_.reset(ml);
    }

  private:
    friend lockable;
    int64_t lease_rc() const noexcept { return lease_ms_; }
    std::unique_ptr<dlock_multilock, void (*)(dlock_multilock *)> ml_;
    std::size_t n_;
    int64_t lease_ms_;
};

/* Every lock or none: dlock::multi_lock ml({m1, m2, m3}); DLOCK_EINVAL
 * (thrown) for no lock, one given twice, two naming the same lock. */
class multi_lock : public basic_multi_lock {
  public:
    multi_lock(const std::vector<std::reference_wrapper<basic_mutex>> &locks,
               std::chrono::milliseconds lease = watchdog)
        : basic_multi_lock(locks, lease, &dlock_multilock_new) {}
};

/* A majority of n >= 3 locks, each on its own client and its own
 * independent Redis server (dlock_redlock_new; docs/c-types.md, "RedLock"):
 * DLOCK_EINVAL (thrown) for fewer, or two on one client or server. */
class red_lock : public basic_multi_lock {
  public:
    red_lock(const std::vector<std::reference_wrapper<basic_mutex>> &locks,
             std::chrono::milliseconds lease = watchdog)
        : basic_multi_lock(locks, lease, &dlock_redlock_new) {}
};

/* ---------------------------------------------------------------- election */

/* Leader election on a name (dlock_election_get; dlock.h, "election"):
 * leading is holding the lock `name` with the watchdog, and the term is its
 * fencing token (terms only grow; a term fences writes as a token does).
 * The object is Lockable and TimedLockable, so leadership is RAII:
 *     dlock::election e(c, "scheduler");
 *     std::unique_lock<dlock::election> lead(e);   // campaigns until elected
 *     ... e.term() ...                             // resigns at scope end
 * lock() campaigns as long as it takes, try_lock_for(d) up to d, lock(token)
 * until the token fires; unlock() resigns and never throws; release() (or
 * resign()) throws DLOCK_ENOTOWNER when this handle does not lead. A handle
 * campaigns as an owner id of its own: campaign, resign and term may be
 * called from any thread, and the asynchronous calls need nothing more. */
class election
    : public detail::lockable<election, dlock_election, &dlock_election_campaign,
                              &dlock_election_resign, &dlock_election_campaign_async,
                              &dlock_election_resign_async> {
  public:
    /* Who leads: term 0 when nobody does (or a new leader has not announced
     * itself yet); who is "host pid owner-id". */
    struct leader_info {
        uint64_t term = 0;
        std::string who;
    };

    election(const client &c, const std::string &name)
        : h_(detail::make<dlock_election, &dlock_election_free>(
              c, [&](dlock_client *cc, dlock_election **out) {
                  return dlock_election_get(cc, name.c_str(), out);
              })) {}
    election(const client &c, const std::string &name, const owner &o)
        : h_(detail::make<dlock_election, &dlock_election_free>(
              c, [&](dlock_client *cc, dlock_election **out) {
                  return dlock_election_get_as(cc, name.c_str(), o.id.c_str(), out);
              })) {}

    /* Campaigns until elected and returns the term (lock(), with the term). */
    uint64_t campaign() {
        lock();
        return term();
    }
    /* Resigns, telling the observers; DLOCK_ENOTOWNER when not leading. */
    void resign() { release(); }
    /* Hands leadership to the successor's owner id (its election object
     * made with dlock::owner{id}): no other campaign wins in between; this
     * object leads no more (dlock_election_handover). */
    void handover(const std::string &successor) {
        detail::check(dlock_election_handover(get(), successor.c_str()));
    }
    /* The successor's one call: adopts the leadership handed to its owner
     * and returns its new term (dlock_election_adopt). */
    uint64_t adopt() {
        uint64_t t = 0;
        detail::check(dlock_election_adopt(get(), &t));
        return t;
    }
    /* The term this handle leads in, 0 when it does not (as far as this
     * process knows). */
    uint64_t term() const noexcept { return dlock_election_term(get()); }
    bool leading() const noexcept { return term() != 0; }

    /* Who leads now (one read). */
    leader_info leader() const {
        leader_info l;
        char who[256];
        detail::check(dlock_election_leader(get(), &l.term, who, sizeof who));
        l.who = who;
        return l;
    }
    /* Waits up to wait (dlock::wait_forever: no limit) for the term to differ
     * from `known`: the new leader, or std::nullopt when the wait ran out.
     * With a token: throws DLOCK_ECANCELED when it fires first. */
    std::optional<leader_info> await_change(uint64_t known, std::chrono::milliseconds wait) const {
        return await_rc(known, wait, nullptr);
    }
    std::optional<leader_info> await_change(uint64_t known, std::chrono::milliseconds wait,
                                            const cancel_token &t) const {
        return await_rc(known, wait, t.native_handle());
    }
    /* The longest a term may last, then it is lost (dlock_election_set_max_hold). */
    void set_max_hold(std::chrono::milliseconds d) {
        detail::check(dlock_election_set_max_hold(get(), d.count()));
    }

    /* Asynchronously: campaign (lock_async; the result's token is the
     * term), resign (unlock_async),
     * leader (token: the term, text: who), await_change (token and text of
     * the new leader). fn(const dlock::async_result &) runs once on dlock's
     * io thread; the object must live until then. */
    template <class F>
    void campaign_async(std::chrono::milliseconds wait, F &&fn) {
        lock_async(wait, std::forward<F>(fn));
    }
    template <class F>
    void campaign_async(std::chrono::milliseconds wait, const cancel_token &t, F &&fn) {
        lock_async(wait, t, std::forward<F>(fn));
    }
    template <class F>
    void resign_async(F &&fn) {
        unlock_async(std::forward<F>(fn));
    }
    template <class F>
    void leader_async(F &&fn) const {
        detail::start_async(std::forward<F>(fn), nullptr, [this](dlock_async_fn cb, void *ud) {
            return dlock_election_leader_async(get(), cb, ud);
        });
    }
    template <class F>
    void await_change_async(uint64_t known, std::chrono::milliseconds wait, F &&fn) const {
        detail::start_wait_async(wait, 0, nullptr, std::forward<F>(fn),
                                 [&](const dlock_wait_opts *o, dlock_async_fn cb, void *ud) {
                                     return dlock_election_await_change_async(get(), known, o, cb, ud);
                                 });
    }

    std::string name() const { return dlock_election_name(get()); }
    dlock_election *native_handle() const noexcept { return h_.get(); }

  private:
    friend lockable;
    dlock_election *get() const noexcept { return h_.get(); }
    int64_t lease_rc() const noexcept { return 0; }
    std::optional<leader_info> await_rc(uint64_t known, std::chrono::milliseconds wait,
                                        dlock_cancel *cancel) const {
        dlock_wait_opts o = detail::opts(detail::wait_ms(wait), 0, cancel);
        leader_info l;
        char who[256];
        if (!detail::answer(dlock_election_await_change(get(), known, &o, &l.term, who, sizeof who)))
            return std::nullopt;
        l.who = who;
        return l;
    }
    detail::handle<dlock_election, &dlock_election_free> h_;
};

/* ------------------------------------------------------------------- latch */

/* A count-down latch, Redisson's RCountDownLatch (dlock_latch_get), used as
 * std::latch is; its count is set with try_set_count (when at zero). */
class latch {
  public:
    latch(const client &c, const std::string &name)
        : h_(detail::make<dlock_latch, &dlock_latch_free>(c, [&](dlock_client *cc, dlock_latch **out) {
              return dlock_latch_get(cc, name.c_str(), out);
          })) {}

    bool try_set_count(int64_t n) {
        int set = 0;
        detail::check(dlock_latch_try_set_count(get(), n, &set));
        return set != 0;
    }
    /* Counts down n times (one round trip each). */
    void count_down(std::ptrdiff_t n = 1) {
        for (std::ptrdiff_t i = 0; i < n; i++)
            detail::check(dlock_latch_count_down(get()));
    }
    int64_t count() const {
        int64_t n = 0;
        detail::check(dlock_latch_count(get(), &n));
        return n;
    }
    /* True when the count is zero (one check). */
    bool try_wait() const { return wait_ms(0); }
    /* Waits until the count is zero. */
    void wait() const { (void)wait_ms(detail::forever_ms); }
    /* Waits up to d: false when the count is not zero by then. */
    template <class Rep, class Period>
    bool wait_for(const std::chrono::duration<Rep, Period> &d) const {
        return wait_ms(detail::to_ms(d));
    }
    template <class Clock, class Duration>
    bool wait_until(const std::chrono::time_point<Clock, Duration> &t) const {
        return wait_ms(detail::until_ms(t));
    }
    /* With a cancel token: throws DLOCK_ECANCELED when t fires first. */
    void wait(const cancel_token &t) const { (void)wait_rc(detail::forever_ms, t.native_handle()); }
    template <class Rep, class Period>
    bool wait_for(const std::chrono::duration<Rep, Period> &d, const cancel_token &t) const {
        return wait_rc(detail::to_ms(d), t.native_handle());
    }
    /* Asynchronously (dlock_latch_await_async): fn gets DLOCK_OK once the
     * count is zero, DLOCK_ETIMEDOUT after wait, DLOCK_ECANCELED. */
    template <class F>
    void wait_async(std::chrono::milliseconds wait, F &&fn) const {
        wait_async_impl(wait, nullptr, std::forward<F>(fn));
    }
    template <class F>
    void wait_async(std::chrono::milliseconds wait, const cancel_token &t, F &&fn) const {
        wait_async_impl(wait, &t, std::forward<F>(fn));
    }
    /* Counts down once asynchronously: the result's count is what is left. */
    template <class F>
    void count_down_async(F &&fn) {
        detail::start_async(std::forward<F>(fn), nullptr, [this](dlock_async_fn cb, void *ud) {
            return dlock_latch_count_down_async(get(), cb, ud);
        });
    }
    void arrive_and_wait(std::ptrdiff_t n = 1) {
        count_down(n);
        wait();
    }

    std::string name() const { return dlock_latch_name(get()); }
    dlock_latch *native_handle() const noexcept { return h_.get(); }

  private:
    dlock_latch *get() const noexcept { return h_.get(); }
    bool wait_ms(int64_t ms) const { return wait_rc(ms, nullptr); }
    bool wait_rc(int64_t ms, dlock_cancel *cancel) const {
        dlock_wait_opts o = detail::opts(ms, 0, cancel);
        return detail::answer(dlock_latch_await_opts(get(), &o));
    }
    template <class F>
    void wait_async_impl(std::chrono::milliseconds wait, const cancel_token *t, F &&fn) const {
        detail::start_wait_async(wait, 0, t, std::forward<F>(fn),
                                 [this](const dlock_wait_opts *o, dlock_async_fn cb, void *ud) {
                                     return dlock_latch_await_async(get(), o, cb, ud);
                                 });
    }
    detail::handle<dlock_latch, &dlock_latch_free> h_;
};

/* A double barrier, dlock's own (dlock_barrier_get; Curator's
 * DistributedDoubleBarrier): one object is one party of `parties`. enter
 * waits until all have entered, leave until all have left; a party whose
 * process dies is dropped after the watchdog timeout. The wait forms return
 * false on a timeout (an enter that times out has withdrawn; a leave that
 * times out has left all the same). Errors throw dlock::error (another
 * round's N: DLOCK_EINVAL; the party dropped while it waited:
 * DLOCK_ENOTOWNER). One party's enter and leave do not overlap. */
class barrier {
  public:
    barrier(const client &c, const std::string &name, int64_t parties)
        : h_(detail::make<dlock_barrier, &dlock_barrier_free>(
              c, [&](dlock_client *cc, dlock_barrier **out) {
                  return dlock_barrier_get(cc, name.c_str(), parties, out);
              })) {}

    void enter() { (void)enter_rc(detail::forever_ms, nullptr); }
    bool try_enter() { return enter_rc(0, nullptr); }
    template <class Rep, class Period>
    bool enter_for(const std::chrono::duration<Rep, Period> &d) {
        return enter_rc(detail::to_ms(d), nullptr);
    }
    /* With a cancel token: throws DLOCK_ECANCELED when t fires first. */
    void enter(const cancel_token &t) { (void)enter_rc(detail::forever_ms, t.native_handle()); }

    void leave() { (void)leave_rc(detail::forever_ms, nullptr); }
    template <class Rep, class Period>
    bool leave_for(const std::chrono::duration<Rep, Period> &d) {
        return leave_rc(detail::to_ms(d), nullptr);
    }
    void leave(const cancel_token &t) { (void)leave_rc(detail::forever_ms, t.native_handle()); }

    /* Asynchronously (dlock_barrier_enter_async / _leave_async): fn gets
     * DLOCK_OK once the round opened (ended), DLOCK_ETIMEDOUT after wait,
     * DLOCK_ECANCELED; the result's token is the round's id. */
    template <class F>
    void enter_async(std::chrono::milliseconds wait, F &&fn) {
        async_impl(false, wait, nullptr, std::forward<F>(fn));
    }
    template <class F>
    void enter_async(std::chrono::milliseconds wait, const cancel_token &t, F &&fn) {
        async_impl(false, wait, &t, std::forward<F>(fn));
    }
    template <class F>
    void leave_async(std::chrono::milliseconds wait, F &&fn) {
        async_impl(true, wait, nullptr, std::forward<F>(fn));
    }
    template <class F>
    void leave_async(std::chrono::milliseconds wait, const cancel_token &t, F &&fn) {
        async_impl(true, wait, &t, std::forward<F>(fn));
    }

    /* The live members of the round in progress (one round trip). */
    int64_t members() const {
        int64_t m = 0;
        detail::check(dlock_barrier_status(get(), &m, nullptr, nullptr));
        return m;
    }
    /* True when entered and not left (dlock_barrier_phase). */
    bool in() const { return dlock_barrier_phase(get()) == DLOCK_BARRIER_IN; }
    /* The id of the round this party entered last (0: none). */
    uint64_t round() const { return dlock_barrier_round(get()); }
    int64_t parties() const { return dlock_barrier_parties(get()); }
    std::string name() const { return dlock_barrier_name(get()); }
    std::string member() const { return dlock_barrier_member(get()); }
    dlock_barrier *native_handle() const noexcept { return h_.get(); }

  private:
    dlock_barrier *get() const noexcept { return h_.get(); }
    bool enter_rc(int64_t ms, dlock_cancel *cancel) {
        dlock_wait_opts o = detail::opts(ms, 0, cancel);
        return detail::answer(dlock_barrier_enter(get(), &o));
    }
    bool leave_rc(int64_t ms, dlock_cancel *cancel) {
        dlock_wait_opts o = detail::opts(ms, 0, cancel);
        return detail::answer(dlock_barrier_leave(get(), &o));
    }
    template <class F>
    void async_impl(bool leave, std::chrono::milliseconds wait, const cancel_token *t, F &&fn) {
        detail::start_wait_async(wait, 0, t, std::forward<F>(fn),
                                 [this, leave](const dlock_wait_opts *o, dlock_async_fn cb, void *ud) {
                                     return leave ? dlock_barrier_leave_async(get(), o, cb, ud)
                                                  : dlock_barrier_enter_async(get(), o, cb, ud);
                                 });
    }
    detail::handle<dlock_barrier, &dlock_barrier_free> h_;
};

/* A rate limiter, Redisson's RRateLimiter (dlock_rate_limiter_get): at most
 * rate permits per interval, overall or per client. try_set_rate/set_rate
 * configure it; acquire waits until the window has the permits
 * (dlock_rate_limiter_try_acquire), try_acquire does not wait. */
class rate_limiter {
  public:
    enum class type { overall = DLOCK_RATE_OVERALL, per_client = DLOCK_RATE_PER_CLIENT };
    rate_limiter(const client &c, const std::string &name)
        : h_(detail::make<dlock_rate_limiter, &dlock_rate_limiter_free>(
              c, [&](dlock_client *cc, dlock_rate_limiter **out) {
                  return dlock_rate_limiter_get(cc, name.c_str(), out);
              })) {}

    /* Sets the rate when none is set: true when this call set it. */
    bool try_set_rate(type t, int64_t rate, std::chrono::milliseconds interval,
                      std::chrono::milliseconds keep_alive = std::chrono::milliseconds(0)) {
        dlock_rate_config cfg = config_of(t, rate, interval, keep_alive);
        int set = 0;
        detail::check(dlock_rate_limiter_try_set_rate(get(), &cfg, &set));
        return set != 0;
    }
    /* Sets it whatever was set; keep_state: the grants in the window count. */
    void set_rate(type t, int64_t rate, std::chrono::milliseconds interval,
                  std::chrono::milliseconds keep_alive = std::chrono::milliseconds(0),
                  bool keep_state = false) {
        dlock_rate_config cfg = config_of(t, rate, interval, keep_alive);
        detail::check(dlock_rate_limiter_set_rate(get(), &cfg, keep_state ? 1 : 0));
    }
    /* Takes n permits, waiting as long as it takes. */
    void acquire(int64_t n = 1) { detail::check(dlock_rate_limiter_acquire(get(), n)); }
    /* One try: false when the window has fewer than n left. */
    bool try_acquire(int64_t n = 1) {
        return detail::answer(dlock_rate_limiter_try_acquire(get(), n, 0));
    }
    /* Waits up to d: false when the permits were not freed by then. */
    template <class Rep, class Period>
    bool try_acquire_for(const std::chrono::duration<Rep, Period> &d, int64_t n = 1) {
        return detail::answer(dlock_rate_limiter_try_acquire(get(), n, detail::to_ms(d)));
    }
    /* With a cancel token: throws DLOCK_ECANCELED when t fires first. */
    template <class Rep, class Period>
    bool try_acquire_for(const std::chrono::duration<Rep, Period> &d, int64_t n,
                         const cancel_token &t) {
        dlock_wait_opts o = detail::opts(detail::to_ms(d), 0, t.native_handle());
        return detail::answer(dlock_rate_limiter_acquire_opts(get(), n, &o));
    }
    /* What the window has left now. */
    int64_t available() const {
        int64_t n = 0;
        detail::check(dlock_rate_limiter_available(get(), &n));
        return n;
    }
    /* Gives n permits back early (at most up to the rate). */
    void release(int64_t n) { detail::check(dlock_rate_limiter_release(get(), n)); }
    /* Throws DLOCK_ENOTFOUND when no rate is set. */
    dlock_rate_config config() const {
        dlock_rate_config cfg{};
        detail::check(dlock_rate_limiter_config(get(), &cfg));
        return cfg;
    }
    bool erase() {
        int deleted = 0;
        detail::check(dlock_rate_limiter_delete(get(), &deleted));
        return deleted != 0;
    }

    std::string name() const { return dlock_rate_limiter_name(get()); }
    dlock_rate_limiter *native_handle() const noexcept { return h_.get(); }

  private:
    static dlock_rate_config config_of(type t, int64_t rate, std::chrono::milliseconds interval,
                                       std::chrono::milliseconds keep_alive) {
        return dlock_rate_config{static_cast<dlock_rate_type>(t), rate,
                                 static_cast<int64_t>(interval.count()),
                                 static_cast<int64_t>(keep_alive.count())};
    }
    dlock_rate_limiter *get() const noexcept { return h_.get(); }
    detail::handle<dlock_rate_limiter, &dlock_rate_limiter_free> h_;
};

}  // namespace dlock

/* So that a std::error_code compares with the enumerators: ec == DLOCK_ETIMEDOUT. */
namespace std {
template <>
struct is_error_code_enum<dlock_status> : true_type {};
}  // namespace std
/* Found by argument-dependent lookup for the C enum (global namespace). */
inline std::error_code make_error_code(dlock_status s) noexcept { return dlock::make_error_code(s); }

#endif /* DLOCK_DLOCK_HPP */
