/* qemu_icount.c: edgert's QEMU TCG plugin, counting the guest instructions one QEMU
 * user-mode run executes (`edgert report --target BOARD`, `edgert bench --profile
 * --target BOARD`; edgert/cli/report_qemu.py builds and loads it).
 *
 * Part of edgert. SPDX-License-Identifier: Apache-2.0
 * Licensed under the Apache License, Version 2.0 (the project's license); the file
 * includes no QEMU header: the few plugin API declarations it needs are written below
 * from QEMU's documented TCG plugin interface.
 *
 * Build (edgert does this itself, into ~/.cache/edgert/icount/):
 *     gcc -O2 -shared -fPIC -fvisibility=hidden -o libicount.so qemu_icount.c
 * Use:
 *     qemu-aarch64 -cpu cortex-a72 -L /usr/aarch64-linux-gnu \
 *         -plugin ./libicount.so[,lo=0x...,hi=0x...] -d plugin ./program args...
 * At exit it writes one line to QEMU's log (stderr with -d plugin):
 *     icount: insns=<all guest instructions> tbs=<translation blocks executed>
 *             in_range=<instructions at addresses lo <= pc < hi> threads=<guest threads>
 * (on one line). in_range is 0 without lo= and hi=.
 *
 * How: when QEMU translates a block, the plugin asks for an inline addition of the block's
 * instruction count (and of the count of its instructions inside [lo, hi)) to a counter,
 * run each time the block starts executing. Inline additions are plain adds to one
 * counter shared by all vCPUs: exact for a single-threaded guest (edgert counts with
 * --threads 1); with several guest threads running at once, additions can be lost.
 *
 * API: plugin API version 1, as in QEMU 4.2 to 8.2 (Debian 12's qemu-user 7.2, Ubuntu
 * 22.04's 6.2 and 24.04's 8.2). QEMU 9.0 and later accept only newer versions (their
 * inline operations take per-vCPU scoreboards) and refuse to load this plugin. */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- the subset of QEMU's plugin API (version 1) used here ---- */

typedef uint64_t qemu_plugin_id_t;
struct qemu_info_t;                 /* passed to qemu_plugin_install; not read here */
struct qemu_plugin_tb;              /* a translation block being translated (opaque) */
struct qemu_plugin_insn;            /* one instruction of such a block (opaque) */

enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 = 0 };

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_simple_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

/* Provided by QEMU, resolved when it loads the plugin. */
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_init_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op, void *ptr,
                                              uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_outs(const char *string);

/* Read by QEMU before it calls qemu_plugin_install: the API version this plugin speaks. */
EXPORT int qemu_plugin_version = 1;

/* ---- the plugin ---- */

static uint64_t insns;      /* every executed guest instruction */
static uint64_t blocks;     /* executed translation blocks */
static uint64_t in_range;   /* executed instructions with range_lo <= pc < range_hi */
static uint64_t range_lo, range_hi;
static unsigned int threads;

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    if (n == 0)
        return;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &insns, n);
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &blocks, 1);
    if (range_hi > range_lo) {
        uint64_t inside = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t pc = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i));
            inside += pc >= range_lo && pc < range_hi;
        }
        if (inside)
            qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &in_range, inside);
    }
}

static void on_vcpu_init(qemu_plugin_id_t id, unsigned int vcpu_index) {
    (void)id;
    /* under user mode every guest thread is a vCPU, numbered from 0 */
    if (vcpu_index + 1 > threads)
        threads = vcpu_index + 1;
}

static void on_guest_exit(qemu_plugin_id_t id, void *userdata) {
    (void)id;
    (void)userdata;
    char line[160];
    snprintf(line, sizeof line, "icount: insns=%" PRIu64 " tbs=%" PRIu64 " in_range=%" PRIu64 " threads=%u\n",
             insns, blocks, in_range, threads);
    qemu_plugin_outs(line);
}

static int parse_address(const char *text, uint64_t *out) {
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 0);
    if (end == text || *end != '\0')
        return -1;
    *out = (uint64_t)v;
    return 0;
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const struct qemu_info_t *info, int argc, char **argv) {
    (void)info;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int bad;
        if (strncmp(a, "lo=", 3) == 0)
            bad = parse_address(a + 3, &range_lo);
        else if (strncmp(a, "hi=", 3) == 0)
            bad = parse_address(a + 3, &range_hi);
        else
            bad = 1;
        if (bad) {
            fprintf(stderr, "qemu_icount: unknown argument %s (expected lo=ADDRESS,hi=ADDRESS)\n", a);
            return -1;
        }
    }
    if (range_hi && range_hi <= range_lo) {
        fprintf(stderr, "qemu_icount: empty address range lo=0x%" PRIx64 " hi=0x%" PRIx64 "\n", range_lo, range_hi);
        return -1;
    }
    qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_guest_exit, NULL);
    return 0;
}
