/* btl/sm lanes that take the caller's Python buffer as it is.
 *
 * pmca_sm_lane_send and pmca_sm_lane_receive take bytes (or a staged copy)
 * and land a receive in the lanes' landing buffer: a numpy array or a
 * bytearray costs the message layer a memoryview, a cast and a copy in
 * Python on each side of the native call.  These two take the object
 * itself (passed as ctypes.py_object) and read its buffer here: a send
 * copies the body straight into its fragment, a receive lands the payload
 * straight in the caller's buffer; a rendezvous send announces the
 * buffer where it lies.  Only functions and the Py_buffer
 * layout that are part of CPython's stable ABI are used, so the library
 * still serves every Python 3 the wheel names; it is loaded with ctypes
 * like the rest of btl/sm and called with the GIL held (PYFUNCTYPE), which
 * pmca_sm_lane_receive_buffer gives up while a large receive may wait or
 * read a rendezvous payload.
 *
 * The few declarations are written out here rather than taken from
 * Python.h, so that building pmca still needs no Python headers (the rest of
 * its C does not either); they are CPython's stable ABI (PEP 384, the buffer
 * protocol since 3.11, laid out the same since 3.3), as pmca.p2p._buffers
 * also relies on from ctypes.
 */
#include "sm.h"

typedef struct py_object py_object; /* opaque */
typedef struct py_thread_state py_thread_state;
typedef struct {
    void *buf;
    py_object *obj;
    ssize_t len;
    ssize_t itemsize;
    int readonly;
    int ndim;
    char *format;
    ssize_t *shape;
    ssize_t *strides;
    ssize_t *suboffsets;
    void *internal;
} py_buffer;
#define PY_BUF_SIMPLE 0
#define PY_BUF_WRITABLE 0x0001
/* Resolved in the interpreter that loads this library (it links no libpython). */
extern int PyObject_GetBuffer(py_object *exporter, py_buffer *view, int flags);
extern void PyBuffer_Release(py_buffer *view);
extern void PyErr_Clear(void);
extern py_thread_state *PyEval_SaveThread(void);
extern void PyEval_RestoreThread(py_thread_state *thread);

/* The buffer `object` exports with `flags` in *view: 0, or -1 with Python's
 * error cleared (the caller answers "the general way", which names why). */
static int acquire(py_object *object, py_buffer *view, int flags)
{
    if (PyObject_GetBuffer(object, view, flags) == 0)
        return 0;
    PyErr_Clear();
    return -1;
}

/* Send `body` (any C-contiguous buffer) as pmca_sm_lane_send sends bytes,
 * when it holds at most `limit` bytes.  0 when sent; PMCA_SM_LANE_LARGE when
 * the body holds more (a rendezvous, not sent); -EINVAL when `body` exports
 * no contiguous buffer (the general path names why); else
 * pmca_sm_lane_send's other statuses. */
EXPORT int pmca_sm_lane_send_buffer(struct sm_ctx *ctx, uint32_t lane, uint32_t limit,
                                    uint32_t sequence, uint32_t tag_low, uint32_t tag_high,
                                    py_object *body)
{
    py_buffer view;
    if (acquire(body, &view, PY_BUF_SIMPLE) != 0)
        return -EINVAL;
    int status = PMCA_SM_LANE_LARGE;
    if ((uint64_t)view.len <= limit)
        status = pmca_sm_lane_send(ctx, lane, sequence, tag_low, tag_high, view.buf,
                                   (uint32_t)view.len);
    PyBuffer_Release(&view);
    return status;
}

/* pmca_sm_lane_receive_into with the caller's writable, C-contiguous buffer
 * `into` as its target.  0 (the general path takes the receive and names
 * why) when `into` exports no such buffer.  A target larger than the
 * landing buffer may take a rendezvous, read for as long as its payload
 * takes: that wait runs without the GIL; a smaller one only polls for the
 * lane spin, as pmca_sm_lane_receive does with the GIL held. */
EXPORT int64_t pmca_sm_lane_receive_buffer(struct sm_ctx *ctx, struct pmca_sm_delivery *out,
                                           uint32_t lane, uint32_t sequence, uint32_t tag_low,
                                           uint32_t tag_high, py_object *into)
{
    py_buffer view;
    if (acquire(into, &view, PY_BUF_WRITABLE) != 0)
        return 0;
    char nothing;
    void *target = view.len > 0 ? view.buf : &nothing;
    uint64_t capacity = (uint64_t)view.len;
    int64_t status;
    if (capacity > ctx->landing_size) {
        py_thread_state *thread = PyEval_SaveThread();
        status = pmca_sm_lane_receive_into(ctx, out, lane, sequence, tag_low, tag_high, target,
                                           capacity);
        PyEval_RestoreThread(thread);
    } else {
        status = pmca_sm_lane_receive_into(ctx, out, lane, sequence, tag_low, tag_high, target,
                                           capacity);
    }
    PyBuffer_Release(&view);
    return status;
}

static void put_le64(unsigned char *out, uint64_t value)
{
    for (int i = 0; i < 8; i++)
        out[i] = (unsigned char)(value >> (8 * i));
}

/* Send the rendezvous (RGET) header of message `sequence` for `body` (any
 * C-contiguous buffer of at least one byte), as pmca_sm_lane_send_rget does:
 * its payload readable where it lies through btl/sm registration `key`
 * alone, for the sender's request `send_id`.  The handle is packed here as
 * pmca.btl.base._remote packs a remote key (key, address, size: three
 * little-endian 64-bit words).  Tag, send id and key travel as their 32-bit
 * halves, C ints all (the call takes no argtypes).  The payload's address
 * (> 0) when sent; -EINVAL when `body` exports no such buffer; else
 * pmca_sm_lane_send_rget's other statuses.  The caller keeps the buffer
 * alive and unmoved until the FIN: its Py_buffer is released here. */
EXPORT int64_t pmca_sm_lane_send_rget_buffer(struct sm_ctx *ctx, uint32_t lane, uint32_t sequence,
                                             uint32_t tag_low, uint32_t tag_high, uint32_t id_low,
                                             uint32_t id_high, uint32_t key_low, uint32_t key_high,
                                             py_object *body)
{
    py_buffer view;
    if (acquire(body, &view, PY_BUF_SIMPLE) != 0)
        return -EINVAL;
    int64_t status = -EINVAL;
    if (view.len > 0) {
        uint64_t address = (uint64_t)(uintptr_t)view.buf;
        uint64_t size = (uint64_t)view.len;
        unsigned char handle[24];
        put_le64(handle, join_halves(key_low, key_high));
        put_le64(handle + 8, address);
        put_le64(handle + 16, size);
        status = pmca_sm_lane_send_rget(ctx, lane, sequence,
                                        (int64_t)join_halves(tag_low, tag_high),
                                        join_halves(id_low, id_high), address, size, handle,
                                        sizeof handle);
        if (status == 0)
            status = (int64_t)address;
    }
    PyBuffer_Release(&view);
    return status;
}
