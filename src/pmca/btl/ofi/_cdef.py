"""libfabric's ABI, declared for cffi's ABI mode (no system headers needed).

Only what pmca uses is declared. The layouts are those of libfabric's
``FABRIC_1.x`` symbol versions, unchanged from 1.14 to 2.x for everything
below; ``fi_info`` and its attribute structs are always allocated by
libfabric itself (``fi_dupinfo(NULL)``/``fi_getinfo``), so fields it added at
their ends can never be overrun. Most of libfabric's API is ``static inline``
in its headers: each such call is a jump through an operations table (a
``struct fi_ops_*`` reached from the object), which :mod:`._fabric`
performs by hand.
"""

from __future__ import annotations

#: The libfabric API version pmca asks for (``FI_VERSION(1, 18)``): behaviour
#: is pinned to it whatever newer library is installed.
API_MAJOR, API_MINOR = 1, 18


def fi_version(major: int, minor: int) -> int:
    """``FI_VERSION(major, minor)``."""
    return (major << 16) | minor


CDEF = """
typedef uint64_t fi_addr_t;
struct iovec { void *iov_base; size_t iov_len; };

struct fid;
struct fi_ops {
    size_t size;
    int (*close)(struct fid *fid);
    int (*bind)(struct fid *fid, struct fid *bfid, uint64_t flags);
    int (*control)(struct fid *fid, int command, void *arg);
    int (*ops_open)(struct fid *fid, const char *name, uint64_t flags, void **ops,
                    void *context);
    int (*tostr)(const struct fid *fid, char *buf, size_t len);
    int (*ops_set)(struct fid *fid, const char *name, uint64_t flags, void *ops,
                   void *context);
};
struct fid {
    size_t fclass;
    void *context;
    struct fi_ops *ops;
};

struct fi_tx_attr {
    uint64_t caps; uint64_t mode; uint64_t op_flags; uint64_t msg_order;
    uint64_t comp_order; size_t inject_size; size_t size; size_t iov_limit;
    size_t rma_iov_limit; uint32_t tclass;
};
struct fi_rx_attr {
    uint64_t caps; uint64_t mode; uint64_t op_flags; uint64_t msg_order;
    uint64_t comp_order; size_t total_buffered_recv; size_t size; size_t iov_limit;
};
struct fi_ep_attr {
    int type; uint32_t protocol; uint32_t protocol_version; size_t max_msg_size;
    size_t msg_prefix_size; size_t max_order_raw_size; size_t max_order_war_size;
    size_t max_order_waw_size; uint64_t mem_tag_format; size_t tx_ctx_cnt;
    size_t rx_ctx_cnt; size_t auth_key_size; uint8_t *auth_key;
};
struct fi_domain_attr {
    void *domain; char *name; int threading; int control_progress;
    int data_progress; int resource_mgmt; int av_type; int mr_mode;
    size_t mr_key_size; size_t cq_data_size; size_t cq_cnt; size_t ep_cnt;
    size_t tx_ctx_cnt; size_t rx_ctx_cnt; size_t max_ep_tx_ctx; size_t max_ep_rx_ctx;
    size_t max_ep_stx_ctx; size_t max_ep_srx_ctx; size_t cntr_cnt; size_t mr_iov_limit;
    uint64_t caps; uint64_t mode; uint8_t *auth_key; size_t auth_key_size;
    size_t max_err_data; size_t mr_cnt; uint32_t tclass;
};
struct fi_fabric_attr {
    void *fabric; char *name; char *prov_name; uint32_t prov_version;
    uint32_t api_version;
};
struct fi_info {
    struct fi_info *next; uint64_t caps; uint64_t mode; uint32_t addr_format;
    size_t src_addrlen; size_t dest_addrlen; void *src_addr; void *dest_addr;
    struct fid *handle; struct fi_tx_attr *tx_attr; struct fi_rx_attr *rx_attr;
    struct fi_ep_attr *ep_attr; struct fi_domain_attr *domain_attr;
    struct fi_fabric_attr *fabric_attr; void *nic;
};

struct fid_domain;
struct fid_av;
struct fid_cq;
struct fid_ep;
struct fid_mr;

struct fi_ops_fabric {
    size_t size;
    int (*domain)(struct fid_fabric *fabric, struct fi_info *info,
                  struct fid_domain **dom, void *context);
};
struct fid_fabric { struct fid fid; struct fi_ops_fabric *ops; uint32_t api_version; };

struct fi_av_attr {
    int type; int rx_ctx_bits; size_t count; size_t ep_per_node; const char *name;
    void *map_addr; uint64_t flags;
};
struct fi_cq_attr {
    size_t size; uint64_t flags; int format; int wait_obj; int signaling_vector;
    int wait_cond; void *wait_set;
};
struct fi_mr_attr {
    const struct iovec *mr_iov; size_t iov_count; uint64_t access; uint64_t offset;
    uint64_t requested_key; void *context; size_t auth_key_size; uint8_t *auth_key;
    int iface; uint64_t device; void *hmem_data; size_t page_size;
    const struct fid_mr *base_mr; size_t sub_mr_cnt;
};

struct fi_ops_domain {
    size_t size;
    int (*av_open)(struct fid_domain *domain, struct fi_av_attr *attr,
                   struct fid_av **av, void *context);
    int (*cq_open)(struct fid_domain *domain, struct fi_cq_attr *attr,
                   struct fid_cq **cq, void *context);
    int (*endpoint)(struct fid_domain *domain, struct fi_info *info,
                    struct fid_ep **ep, void *context);
};
struct fi_ops_mr {
    size_t size;
    void *reg;
    void *regv;
    int (*regattr)(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
                   struct fid_mr **mr);
};
struct fid_domain { struct fid fid; struct fi_ops_domain *ops; struct fi_ops_mr *mr; };
struct fid_mr { struct fid fid; void *mem_desc; uint64_t key; };

struct fi_ops_av {
    size_t size;
    int (*insert)(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr,
                  uint64_t flags, void *context);
};
struct fid_av { struct fid fid; struct fi_ops_av *ops; };

struct fi_cq_tagged_entry {
    void *op_context; uint64_t flags; size_t len; void *buf; uint64_t data; uint64_t tag;
};
struct fi_cq_err_entry {
    void *op_context; uint64_t flags; size_t len; void *buf; uint64_t data; uint64_t tag;
    size_t olen; int err; int prov_errno; void *err_data; size_t err_data_size;
    fi_addr_t src_addr;
};
struct fi_ops_cq {
    size_t size;
    ssize_t (*read)(struct fid_cq *cq, void *buf, size_t count);
    ssize_t (*readfrom)(struct fid_cq *cq, void *buf, size_t count, fi_addr_t *src_addr);
    ssize_t (*readerr)(struct fid_cq *cq, struct fi_cq_err_entry *buf, uint64_t flags);
};
struct fid_cq { struct fid fid; struct fi_ops_cq *ops; };

struct fi_ops_ep {
    size_t size;
    ssize_t (*cancel)(struct fid *fid, void *context);
};
struct fi_ops_cm {
    size_t size;
    int (*setname)(struct fid *fid, void *addr, size_t addrlen);
    int (*getname)(struct fid *fid, void *addr, size_t *addrlen);
};
struct fi_ops_rma {
    size_t size;
    ssize_t (*read)(struct fid_ep *ep, void *buf, size_t len, void *desc,
                    fi_addr_t src_addr, uint64_t addr, uint64_t key, void *context);
    void *readv;
    void *readmsg;
    ssize_t (*write)(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                     fi_addr_t dest_addr, uint64_t addr, uint64_t key, void *context);
};
struct fi_ops_tagged {
    size_t size;
    ssize_t (*recv)(struct fid_ep *ep, void *buf, size_t len, void *desc,
                    fi_addr_t src_addr, uint64_t tag, uint64_t ignore, void *context);
    void *recvv;
    void *recvmsg;
    ssize_t (*send)(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                    fi_addr_t dest_addr, uint64_t tag, void *context);
    void *sendv;
    void *sendmsg;
    ssize_t (*inject)(struct fid_ep *ep, const void *buf, size_t len,
                      fi_addr_t dest_addr, uint64_t tag);
};
struct fid_ep {
    struct fid fid; struct fi_ops_ep *ops; struct fi_ops_cm *cm; void *msg;
    struct fi_ops_rma *rma; struct fi_ops_tagged *tagged; void *atomic; void *collective;
};

struct fid_mem_monitor;
struct fi_ops_mem_monitor {
    size_t size;
    int (*start)(struct fid_mem_monitor *monitor);
    void (*stop)(struct fid_mem_monitor *monitor);
    int (*subscribe)(struct fid_mem_monitor *monitor, const void *addr, size_t len);
    void (*unsubscribe)(struct fid_mem_monitor *monitor, const void *addr, size_t len);
    bool (*valid)(struct fid_mem_monitor *monitor, const void *addr, size_t len);
};
struct fi_ops_mem_notify {
    size_t size;
    void (*notify)(struct fid_mem_monitor *monitor, const void *addr, size_t len);
};
struct fid_mem_monitor {
    struct fid fid;
    struct fi_ops_mem_monitor *export_ops;
    struct fi_ops_mem_notify *import_ops;
};

uint32_t fi_version(void);
int fi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
               const struct fi_info *hints, struct fi_info **info);
void fi_freeinfo(struct fi_info *info);
struct fi_info *fi_dupinfo(const struct fi_info *info);
int fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
int fi_open(uint32_t version, const char *name, void *attr, size_t attr_len,
            uint64_t flags, struct fid **fid, void *context);
const char *fi_strerror(int errnum);
"""

# Values from libfabric's headers (rdma/fabric.h, fi_domain.h, fi_eq.h, fi_errno.h).
FI_MSG = 1 << 1
FI_RMA = 1 << 2
FI_TAGGED = 1 << 3
FI_READ = 1 << 8
FI_WRITE = 1 << 9
FI_RECV = 1 << 10
FI_SEND = 1 << 11
FI_TRANSMIT = FI_SEND
FI_REMOTE_READ = 1 << 12
FI_REMOTE_WRITE = 1 << 13
FI_CONTEXT = 1 << 59
FI_CONTEXT2 = 1 << 52
FI_ORDER_SAS = 1 << 8

FI_MR_LOCAL = 1 << 2
FI_MR_VIRT_ADDR = 1 << 4
FI_MR_ALLOCATED = 1 << 5
FI_MR_PROV_KEY = 1 << 6
FI_MR_ENDPOINT = 1 << 9

FI_EP_RDM = 3
FI_AV_TABLE = 2
FI_THREAD_DOMAIN = 3
FI_PROGRESS_MANUAL = 2
FI_CQ_FORMAT_TAGGED = 4
FI_WAIT_NONE = 0
FI_HMEM_SYSTEM = 0
FI_ADDR_UNSPEC = (1 << 64) - 1

FI_ENABLE = 6  # the seventh control command
FI_CLASS_MEM_MONITOR = 23

FI_EAGAIN = 11
FI_EBUSY = 16
FI_ENOSYS = 38
FI_ENODATA = 61
FI_ECANCELED = 125
FI_ETOOSMALL = 257
FI_EAVAIL = 259
