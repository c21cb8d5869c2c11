// The asynchronous API from C++, with a small RAII wrapper: a Guard owns one
// hold and gives it back (asynchronously) when it goes out of scope, so a
// hold cannot be forgotten on an early return or an exception.
//
//   example_raii URL
//
// Three "tasks" want the same lock; each acquisition completes on dlock's
// io thread, which hands the Guard to a worker thread: the hold moves between
// threads, as work does in an event-loop program (each task acts for its own
// owner id, not for a thread). The worker holds it 30 ms and lets it go. The
// main thread waits for all three. Prints each task's turn and exits 0 when
// the turns did not overlap and their fencing tokens grew.
//
// For blocking calls, include/dlock/dlock.hpp has the RAII types ready made
// (std::unique_lock on a dlock::mutex, and more): see examples/guards.cpp.
// This example keeps its own wrapper because dlock.hpp does not wrap the
// asynchronous API.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <dlock/async.h>

#include "common.h"

namespace {

// One hold of a lock; released (asynchronously) by the destructor.
class Guard {
  public:
    Guard() = default;
    explicit Guard(std::shared_ptr<dlock_lock> l, uint64_t token)
        : lock_(std::move(l)), token_(token) {}
    Guard(Guard &&o) noexcept : lock_(std::move(o.lock_)), token_(o.token_) {}
    Guard &operator=(Guard &&o) noexcept {
        reset();
        lock_ = std::move(o.lock_);
        token_ = o.token_;
        return *this;
    }
    Guard(const Guard &) = delete;
    Guard &operator=(const Guard &) = delete;
    ~Guard() { reset(); }

    uint64_t token() const { return token_; }
    explicit operator bool() const { return lock_ != nullptr; }

    // Gives the hold back now; the handle lives until the release answers.
    void reset() {
        if (!lock_)
            return;
        auto *keep = new std::shared_ptr<dlock_lock>(std::move(lock_));
        int rc = dlock_lock_release_async(
            keep->get(),
            [](const dlock_async_result *res, void *ud) {
                auto *k = static_cast<std::shared_ptr<dlock_lock> *>(ud);
                if (dlock_async_status(res) != DLOCK_OK)
                    std::fprintf(stderr, "release: %s\n", dlock_async_message(res));
                delete k;
            },
            keep);
        if (rc != DLOCK_OK) {
            std::fprintf(stderr, "release: %s\n", dlock_last_error());
            delete keep;
        }
    }

  private:
    std::shared_ptr<dlock_lock> lock_;
    uint64_t token_ = 0;
};

// A lock that one owner (one task, whatever thread runs it) acquires
// asynchronously: the callback gets a Guard, or the error.
class AsyncLock {
  public:
    AsyncLock(dlock_client *c, const std::string &name) {
        char owner[DLOCK_OWNER_BUFSIZE];
        dlock_lock *l = nullptr;
        if (dlock_client_new_owner_id(c, owner, sizeof(owner)) != DLOCK_OK ||
            dlock_lock_get_as(c, name.c_str(), owner, &l) != DLOCK_OK)
            throw std::runtime_error(dlock_last_error());
        lock_.reset(l, dlock_lock_free);
    }

    using Done = std::function<void(int status, const char *message, Guard guard)>;

    // wait_ms, lease_ms as for dlock_lock_acquire_async; done runs once, on
    // dlock's io thread.
    void acquire(int64_t wait_ms, int64_t lease_ms, Done done) {
        auto *call = new Call{lock_, std::move(done), 0};
        dlock_wait_opts o = {};
        o.wait_ms = wait_ms;
        o.lease_ms = lease_ms;
        o.token = &call->token;   // written before on_done runs
        int rc = dlock_lock_acquire_async(lock_.get(), &o, &AsyncLock::on_done, call);
        if (rc != DLOCK_OK) {
            delete call;
            throw std::runtime_error(dlock_last_error());
        }
    }

  private:
    struct Call {
        std::shared_ptr<dlock_lock> lock;
        Done done;
        uint64_t token;
    };

    static void on_done(const dlock_async_result *res, void *ud) {
        std::unique_ptr<Call> call(static_cast<Call *>(ud));
        int st = dlock_async_status(res);
        Guard g = st == DLOCK_OK ? Guard(call->lock, call->token) : Guard();
        call->done(st, dlock_async_message(res), std::move(g));
    }

    std::shared_ptr<dlock_lock> lock_;
};

}  // namespace

int main(int argc, char **argv) {
    dlock_client *c = example_open(argc, argv, 0);
    int result = 1;
    {
        std::atomic<int> inside{0}, overlaps{0}, turns{0};
        std::atomic<uint64_t> last_token{0};
        std::atomic<int> tokens_grew{1};
        std::promise<void> all_done;
        std::mutex mu;
        std::vector<std::thread> workers;
        std::vector<std::unique_ptr<AsyncLock>> tasks;
        for (int i = 0; i < 3; i++)
            tasks.emplace_back(new AsyncLock(c, "example:raii"));
        for (int i = 0; i < 3; i++) {
            tasks[i]->acquire(10000, DLOCK_WATCHDOG, [&, i](int status, const char *message,
                                                            Guard guard) {
                if (status != DLOCK_OK) {
                    std::printf("task %d: %s\n", i, message);
                    if (++turns == 3)
                        all_done.set_value();
                    return;
                }
                // The hold moves to a worker thread; its owner id goes with it.
                std::lock_guard<std::mutex> lk(mu);
                workers.emplace_back([&, i, g = std::move(guard)]() mutable {
                    if (++inside > 1)
                        overlaps++;
                    if (g.token() <= last_token.exchange(g.token()))
                        tokens_grew = 0;
                    std::printf("task %d holds the lock (fencing token %llu)\n", i,
                                (unsigned long long)g.token());
                    std::fflush(stdout);
                    std::this_thread::sleep_for(std::chrono::milliseconds(30));
                    inside--;
                    g.reset();   // or let it go out of scope
                    if (++turns == 3)
                        all_done.set_value();
                });
            });
        }
        all_done.get_future().wait();
        {
            std::lock_guard<std::mutex> lk(mu);
            for (auto &t : workers)
                t.join();
        }
        std::printf("3 turns, %d overlapping, tokens %s\n", overlaps.load(),
                    tokens_grew ? "growing" : "NOT growing");
        result = overlaps == 0 && tokens_grew ? 0 : 1;
        // Let the last release answer before the handles go.
        for (int i = 0; i < 400 && dlock_client_async_pending(c) > 0; i++)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    dlock_client_close(c);
    return result;
}
