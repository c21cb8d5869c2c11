/* A loopback TCP proxy in front of a test Redis, for injecting faults that a
 * real network has: replies that never arrive, connections cut mid-request. */
#ifndef DLOCK_TEST_PROXY_H
#define DLOCK_TEST_PROXY_H

typedef struct th_proxy th_proxy;

/* Listens on a free 127.0.0.1 port and forwards to 127.0.0.1:target_port. */
th_proxy *th_proxy_start(int target_port);
int th_proxy_port(const th_proxy *p);
/* Connections open now stop getting the server's replies (requests still go
 * through); connections opened later are unaffected. */
void th_proxy_swallow_replies(th_proxy *p);
/* While on, nothing passes in either direction and new connections hang
 * (a partition); off resumes (connections cut meanwhile stay closed). */
void th_proxy_blackhole(th_proxy *p, int on);
/* Connections opened from now on go to 127.0.0.1:target_port (those open
 * stay where they are): a DNS name that now names another server. */
void th_proxy_retarget(th_proxy *p, int target_port);
/* Closes every connection open now. */
void th_proxy_cut(th_proxy *p);
void th_proxy_stop(th_proxy *p);

#endif
