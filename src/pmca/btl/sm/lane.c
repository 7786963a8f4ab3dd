/* btl/sm lanes: the message layer's blocking eager send and receive to one
 * peer, each one call from Python.
 *
 * A lane is (peer id, active-message tag), packed in one integer: peer in
 * the low 32 bits, tag above.  pmca_sm_lane_send writes the match header
 * (struct pmca_match_header) and the payload into one fragment;
 * pmca_sm_lane_receive polls the receive FIFO for a while and reports
 * whether its head is the very message a blocking receive waits for.  Any
 * other message is taken off the FIFO all the same and handed to the caller
 * as pmca_sm_poll would hand it, so the FIFO's order is never changed:
 * the caller runs it through the general path.
 */
#include "sm.h"

static inline uint32_t lane_peer(uint64_t lane) { return (uint32_t)lane; }
static inline uint32_t lane_tag(uint64_t lane) { return (uint32_t)(lane >> 32); }

/* Send the eager message `sequence` with user tag `tag` and `length` bytes
 * of `body` through `lane`: pmca_sm_send's return values. */
EXPORT int pmca_sm_lane_send(struct sm_ctx *ctx, uint64_t lane, uint32_t sequence, int64_t tag,
                             const void *body, uint64_t length)
{
    struct pmca_match_header header = {MATCH_EAGER, 0, 0, sequence, tag, length};
    return sm_send_parts(ctx, lane_peer(lane), lane_tag(lane), &header, sizeof header, body,
                         length);
}

static uint64_t now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* Poll our FIFO for up to `ns` nanoseconds: 1 when a message waits. */
static int spin(struct sm_ctx *ctx, uint64_t ns)
{
    if (pmca_sm_fifo_ready(ctx->self))
        return 1;
    if (ns == 0)
        return 0;
    uint64_t deadline = now_ns() + ns;
    for (uint32_t i = 1;; i++) {
        __builtin_ia32_pause();
        if (pmca_sm_fifo_ready(ctx->self))
            return 1;
        if ((i & 63) == 0 && now_ns() >= deadline)
            return 0;
    }
}

static int is_awaited(const struct pmca_sm_delivery *d, uint64_t lane, const char *payload,
                      uint32_t sequence, int64_t tag)
{
    struct pmca_match_header header;
    if (d->source != lane_peer(lane) || d->tag != lane_tag(lane) || d->length < sizeof header)
        return 0;
    memcpy(&header, payload, sizeof header);
    return header.kind == MATCH_EAGER && header.sequence == sequence && header.tag == tag &&
           header.size == d->length - sizeof header;
}

/* Hand back the previous delivery, poll the FIFO for up to the lane spin
 * (pmca_sm_set_lane_spin), then take its head into *out:
 *   1: the eager message `sequence` with user tag `tag` from the lane's
 *      peer; *out describes its payload, without the match header;
 *   2: any other message, described as by pmca_sm_poll;
 *   0: nothing arrived in time;
 *  <0: pmca_sm_poll's errors, or -ENOTCONN when the peer is not attached.
 * The payload stays valid until the next poll, receive, release or detach. */
EXPORT int pmca_sm_lane_receive(struct sm_ctx *ctx, uint64_t lane, uint32_t sequence, int64_t tag,
                                struct pmca_sm_delivery *out)
{
    sm_release_delivered(ctx);
    uint32_t peer = lane_peer(lane);
    if (!ctx->peers || peer >= ctx->slots || !ctx->peers[peer].segment)
        return -ENOTCONN;
    if (!spin(ctx, ctx->lane_spin_ns))
        return 0;
    int status = sm_take(ctx, out);
    if (status != 1)
        return status;
    const char *payload = (const char *)ctx->peers[out->source].segment + out->offset;
    if (!is_awaited(out, lane, payload, sequence, tag))
        return 2;
    out->offset += sizeof(struct pmca_match_header);
    out->length -= sizeof(struct pmca_match_header);
    return 1;
}

EXPORT void pmca_sm_set_lane_spin(struct sm_ctx *ctx, uint64_t ns) { ctx->lane_spin_ns = ns; }

EXPORT uint32_t pmca_sm_match_header_size(void) { return sizeof(struct pmca_match_header); }
