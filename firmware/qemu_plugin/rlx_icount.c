/* QEMU TCG plugin: counts guest instructions executed, exactly and
 * repeatably, optionally only inside measurement windows and address ranges.
 *
 * Written against plugin API version 1 (QEMU 6.x-8.x). Debian ships no
 * qemu-plugin.h, so the few declarations used are repeated below; their
 * layout is QEMU's ABI for that version.
 *
 * Arguments (-plugin librlx_icount.so,key=value,...):
 *   out=PATH     where to write the result (default: stderr)
 *   start=ADDR   executing ADDR opens a window (e.g. a function's entry)
 *   stop=ADDR    executing ADDR closes it (e.g. the return addresses of the
 *                calls to that function); up to 64 stop addresses
 *   range=LO:HI  count only instructions at LO <= pc < HI (up to 64 ranges;
 *                none means all addresses)
 *   skip=LO:HI   never count instructions at LO <= pc < HI (e.g. interrupt
 *                handlers whose timing depends on the host clock)
 *   split=ADDR   executing ADDR inside a window starts its next segment
 *                (e.g. the return addresses of a model's kernel calls: one
 *                segment per layer); up to 4096 split addresses
 *   hist=1       also count, per segment, how often each instruction address
 *                ran (for a cycle estimate by instruction class)
 * Without start, counting is on from the first instruction.
 *
 * Output, one item per line: "window N" for every closed window in order,
 * then "windows K" and "total T" (all instructions counted, inside windows
 * or, without start, overall). With splits: "segment S N" for every segment
 * of the windows (S counts on across windows). With hist: "pc S ADDR N" for
 * every instruction address that ran N > 0 times in segment S (an address
 * may appear on several lines for one S: add them).
 *
 * Counting is per translation block where a block holds no start/stop
 * address (one callback adds the block's countable instructions when counting
 * is on), and per instruction in the few blocks that do. A block runs to its
 * end unless an instruction in it faults, which ends a firmware run anyway;
 * QEMU must not be given -icount, whose I/O re-execution would count the
 * instructions before an MMIO access twice.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- QEMU plugin API v1 (include/qemu/qemu-plugin.h) ---- */
typedef uint64_t qemu_plugin_id_t;

typedef struct {
    const char *target_name;
    struct {
        int min;
        int cur;
    } version;
    bool system_emulation;
    union {
        struct {
            int smp_vcpus;
            int max_vcpus;
        } system;
    };
} qemu_info_t;

struct qemu_plugin_tb;
struct qemu_plugin_insn;

enum qemu_plugin_cb_flags {
    QEMU_PLUGIN_CB_NO_REGS,
    QEMU_PLUGIN_CB_R_REGS,
    QEMU_PLUGIN_CB_RW_REGS,
};

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);

#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))
QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;
QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv);
/* ---- end of the API declarations ---- */

#define MAX_ADDRS 64
#define MAX_WINDOWS 65536
#define MAX_SPLITS 4096
#define MAX_SEGMENTS 65536

struct span {
    uint64_t lo, hi;
};

static uint64_t start_addr;
static bool have_start;
static uint64_t stop_addrs[MAX_ADDRS];
static int n_stops;
static struct span ranges[MAX_ADDRS];
static int n_ranges;
static struct span skips[MAX_ADDRS];
static int n_skips;
static char *out_path;
static uint64_t split_addrs[MAX_SPLITS];
static int n_splits;
static bool hist;

/* What one translated block (or one instruction of a marked block) counts:
 * its countable instruction addresses and, with hist, executions per segment. */
struct rec {
    struct rec *next;
    uintptr_t kind; /* per-instruction records: INSN_* bits */
    size_t n;       /* countable instructions */
    uint64_t *runs; /* with hist: executions per segment, grown on demand */
    size_t n_runs;
    uint64_t addrs[];
};
static struct rec *recs;

/* Guest state. The Cortex-M machines have one vCPU, so no locking. */
static bool counting;
static uint64_t total;
static uint64_t window_begin;
static uint64_t windows[MAX_WINDOWS];
static uint64_t n_windows;
static uint64_t segment;       /* the current segment: counts on across windows */
static uint64_t segment_begin; /* total when it began */
static uint64_t segments[MAX_SEGMENTS];
static uint64_t n_segments;

enum { INSN_COUNT = 1, INSN_START = 2, INSN_STOP = 4, INSN_SPLIT = 8 };

static void end_segment(void)
{
    if (n_segments < MAX_SEGMENTS) segments[n_segments] = total - segment_begin;
    ++n_segments;
    ++segment;
    segment_begin = total;
}

static void add_run(struct rec *r)
{
    if (!hist) return;
    if (segment >= r->n_runs) {
        size_t n = r->n_runs ? r->n_runs : 8;
        while (n <= segment) n *= 2;
        uint64_t *grown = realloc(r->runs, n * sizeof *grown);
        if (!grown) return; /* out of memory: the histogram misses this run, the counts do not */
        memset(grown + r->n_runs, 0, (n - r->n_runs) * sizeof *grown);
        r->runs = grown;
        r->n_runs = n;
    }
    ++r->runs[segment];
}

static struct rec *new_rec(size_t n, uintptr_t kind)
{
    struct rec *r = calloc(1, sizeof *r + n * sizeof r->addrs[0]);
    if (!r) {
        fprintf(stderr, "rlx_icount: out of memory\n");
        abort();
    }
    r->kind = kind;
    r->next = recs;
    recs = r;
    return r;
}

static bool in_spans(const struct span *s, int n, uint64_t a)
{
    for (int i = 0; i < n; ++i) {
        if (a >= s[i].lo && a < s[i].hi) return true;
    }
    return false;
}

static bool countable(uint64_t a)
{
    return (n_ranges == 0 || in_spans(ranges, n_ranges, a)) && !in_spans(skips, n_skips, a);
}

static void tb_exec(unsigned int vcpu, void *udata)
{
    (void)vcpu;
    struct rec *r = udata;
    if (counting) {
        total += r->n;
        add_run(r);
    }
}

/* Start opens before its instruction is counted and stop closes before its
 * instruction would be, so a window holds exactly the instructions from the
 * start address up to, not including, the stop address. */
static void insn_exec(unsigned int vcpu, void *udata)
{
    (void)vcpu;
    struct rec *r = udata;
    uintptr_t kind = r->kind;
    if ((kind & INSN_START) && !counting) {
        counting = true;
        window_begin = total;
        segment_begin = total;
    }
    if ((kind & INSN_STOP) && counting && have_start) {
        counting = false;
        if (n_windows < MAX_WINDOWS) windows[n_windows] = total - window_begin;
        ++n_windows;
        if (n_splits) end_segment();
    }
    if ((kind & INSN_SPLIT) && counting) end_segment();
    if ((kind & INSN_COUNT) && counting) {
        ++total;
        add_run(r);
    }
}

static bool is_split(uint64_t a)
{
    for (int k = 0; k < n_splits; ++k) {
        if (a == split_addrs[k]) return true;
    }
    return false;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    uintptr_t n_count = 0;
    bool marked = false;
    for (size_t i = 0; i < n; ++i) {
        uint64_t a = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i));
        n_count += countable(a);
        if (have_start && a == start_addr) marked = true;
        for (int k = 0; k < n_stops; ++k) marked |= a == stop_addrs[k];
        marked |= is_split(a);
    }
    if (!marked) {
        if (!n_count) return;
        struct rec *r = new_rec(n_count, 0);
        for (size_t i = 0; i < n; ++i) {
            uint64_t a = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i));
            if (countable(a)) r->addrs[r->n++] = a;
        }
        qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, QEMU_PLUGIN_CB_NO_REGS, r);
        return;
    }
    for (size_t i = 0; i < n; ++i) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t a = qemu_plugin_insn_vaddr(insn);
        uintptr_t kind = countable(a) ? INSN_COUNT : 0;
        if (have_start && a == start_addr) kind |= INSN_START;
        for (int k = 0; k < n_stops; ++k) {
            if (a == stop_addrs[k]) kind |= INSN_STOP;
        }
        if (is_split(a)) kind |= INSN_SPLIT;
        if (!kind) continue;
        struct rec *r = new_rec(1, kind);
        r->addrs[0] = a;
        r->n = (kind & INSN_COUNT) ? 1 : 0;
        qemu_plugin_register_vcpu_insn_exec_cb(insn, insn_exec, QEMU_PLUGIN_CB_NO_REGS, r);
    }
}

static void at_exit(qemu_plugin_id_t id, void *udata)
{
    (void)id;
    (void)udata;
    FILE *f = out_path ? fopen(out_path, "w") : stderr;
    if (!f) {
        fprintf(stderr, "rlx_icount: cannot write %s\n", out_path);
        return;
    }
    uint64_t shown = n_windows < MAX_WINDOWS ? n_windows : MAX_WINDOWS;
    for (uint64_t i = 0; i < shown; ++i) fprintf(f, "window %" PRIu64 "\n", windows[i]);
    fprintf(f, "windows %" PRIu64 "\ntotal %" PRIu64 "\n", n_windows, total);
    uint64_t segs = n_segments < MAX_SEGMENTS ? n_segments : MAX_SEGMENTS;
    for (uint64_t i = 0; i < segs; ++i) fprintf(f, "segment %" PRIu64 " %" PRIu64 "\n", i, segments[i]);
    for (struct rec *r = recs; r; r = r->next) {
        for (size_t sgi = 0; sgi < r->n_runs; ++sgi) {
            if (!r->runs[sgi]) continue;
            for (size_t i = 0; i < r->n; ++i) {
                fprintf(f, "pc %zu %#" PRIx64 " %" PRIu64 "\n", sgi, r->addrs[i], r->runs[sgi]);
            }
        }
    }
    if (f != stderr) fclose(f);
}

static bool parse_addr(const char *s, uint64_t *out)
{
    char *end;
    *out = strtoull(s, &end, 0);
    return end != s && *end == '\0';
}

static bool parse_span(const char *s, struct span *out)
{
    char buf[64];
    const char *colon = strchr(s, ':');
    if (!colon || (size_t)(colon - s) >= sizeof buf) return false;
    memcpy(buf, s, (size_t)(colon - s));
    buf[colon - s] = '\0';
    return parse_addr(buf, &out->lo) && parse_addr(colon + 1, &out->hi) && out->lo < out->hi;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    (void)info;
    for (int i = 0; i < argc; ++i) {
        const char *arg = argv[i];
        bool ok;
        if (strncmp(arg, "out=", 4) == 0) {
            free(out_path);
            out_path = strdup(arg + 4);
            ok = out_path != NULL;
        } else if (strncmp(arg, "start=", 6) == 0) {
            ok = parse_addr(arg + 6, &start_addr);
            have_start = true;
        } else if (strncmp(arg, "stop=", 5) == 0) {
            ok = n_stops < MAX_ADDRS && parse_addr(arg + 5, &stop_addrs[n_stops++]);
        } else if (strncmp(arg, "range=", 6) == 0) {
            ok = n_ranges < MAX_ADDRS && parse_span(arg + 6, &ranges[n_ranges++]);
        } else if (strncmp(arg, "split=", 6) == 0) {
            ok = n_splits < MAX_SPLITS && parse_addr(arg + 6, &split_addrs[n_splits++]);
        } else if (strcmp(arg, "hist=1") == 0) {
            hist = true;
            ok = true;
        } else if (strncmp(arg, "skip=", 5) == 0) {
            ok = n_skips < MAX_ADDRS && parse_span(arg + 5, &skips[n_skips++]);
        } else {
            ok = false;
        }
        if (!ok) {
            fprintf(stderr, "rlx_icount: bad argument '%s'\n", arg);
            return -1;
        }
    }
    counting = !have_start;
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
