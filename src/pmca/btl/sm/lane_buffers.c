/* btl/sm lanes that take the caller's Python buffer as it is.
 *
 * pmca_sm_lane_send and pmca_sm_lane_receive take bytes (or a staged copy)
 * and land a receive in the lanes' landing buffer: a numpy array or a
 * bytearray costs the message layer a memoryview, a cast and a copy in
 * Python on each side of the native call.  These two take the object
 * itself (passed as ctypes.py_object) and read its buffer here: a send
 * copies the body straight into its fragment, a receive lands the payload
 * straight in the caller's buffer.  Only functions and the Py_buffer
 * layout that are part of CPython's stable ABI are used, so the library
 * still serves every Python 3 the wheel names; it is loaded with ctypes
 * like the rest of btl/sm and called with the GIL held (PYFUNCTYPE), which
 * pmca_sm_lane_receive_buffer gives up while a large receive may wait or
 * read a rendezvous payload.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#undef _GNU_SOURCE /* sm.h asks for it as well */
#include "sm.h"

/* Send `body` (any C-contiguous buffer) as pmca_sm_lane_send sends bytes,
 * when it holds at most `limit` bytes.  0 when sent; PMCA_SM_LANE_LARGE when
 * the body holds more (a rendezvous, not sent); -EINVAL when `body` exports
 * no contiguous buffer (the general path names why); else
 * pmca_sm_lane_send's other statuses. */
EXPORT int pmca_sm_lane_send_buffer(struct sm_ctx *ctx, uint32_t lane, uint32_t limit,
                                    uint32_t sequence, uint32_t tag_low, uint32_t tag_high,
                                    PyObject *body)
{
    Py_buffer view;
    if (PyObject_GetBuffer(body, &view, PyBUF_SIMPLE) != 0) {
        PyErr_Clear();
        return -EINVAL;
    }
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
                                           uint32_t tag_high, PyObject *into)
{
    Py_buffer view;
    if (PyObject_GetBuffer(into, &view, PyBUF_WRITABLE) != 0) {
        PyErr_Clear();
        return 0;
    }
    char nothing;
    void *target = view.len > 0 ? view.buf : &nothing;
    uint64_t capacity = (uint64_t)view.len;
    int64_t status;
    if (capacity > ctx->landing_size) {
        PyThreadState *thread = PyEval_SaveThread();
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
