/* qemu_icount_threads.c: edgert's QEMU TCG plugin counting guest instructions per guest
 * thread (`edgert bench --threads N --target BOARD`; edgert/cli/report_qemu.py builds and
 * loads it).
 *
 * Part of edgert. SPDX-License-Identifier: Apache-2.0
 * Licensed under the Apache License, Version 2.0 (the project's license); the file
 * includes no QEMU header: the few plugin API declarations it needs are written below
 * from QEMU's documented TCG plugin interface.
 *
 * Build (edgert does this itself, into ~/.cache/edgert/icount/):
 *     gcc -O2 -shared -fPIC -fvisibility=hidden -o libicount_threads.so qemu_icount_threads.c
 * Use:
 *     qemu-aarch64 -cpu cortex-a72 -L /usr/aarch64-linux-gnu \
 *         -plugin ./libicount_threads.so -d plugin ./program args...
 * At exit it writes one line to QEMU's log (stderr with -d plugin):
 *     icount_threads: total=<all threads> max=<busiest thread> threads=<n> per=<c0>,<c1>,...
 * where c<i> counts the instructions of guest thread i, numbered in the order the threads
 * started (the main thread is 0).
 *
 * How: under QEMU user mode every guest thread is a vCPU. When QEMU translates a block the
 * plugin registers a callback, run each time the block starts executing, that adds the
 * block's instruction count to the counter of the vCPU executing it. A vCPU only ever
 * touches its own counter (each on its own cache line), so the counts are exact whatever
 * the threads do at the same time.
 *
 * API: plugin API version 1, as in QEMU 4.2 to 8.2 (Debian 12's qemu-user 7.2). */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- the subset of QEMU's plugin API (version 1) used here ---- */

typedef uint64_t qemu_plugin_id_t;
struct qemu_info_t;    /* passed to qemu_plugin_install; not read here */
struct qemu_plugin_tb; /* a translation block being translated (opaque) */

enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS = 0 };

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

/* Provided by QEMU, resolved when it loads the plugin. */
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
void qemu_plugin_outs(const char *string);

/* Read by QEMU before it calls qemu_plugin_install: the API version this plugin speaks. */
EXPORT int qemu_plugin_version = 1;

/* ---- the plugin ---- */

enum { MAX_THREADS = 256 };

/* One counter per vCPU, each on its own 64-byte line. Threads past MAX_THREADS are
 * counted together in `beyond` (and reported as such). */
static struct {
    uint64_t n;
    char pad[56];
} counts[MAX_THREADS] __attribute__((aligned(64)));
static uint64_t beyond;

static void on_block(unsigned int vcpu, void *insns) {
    if (vcpu < MAX_THREADS)
        counts[vcpu].n += (uint64_t)(uintptr_t)insns;
    else
        __atomic_fetch_add(&beyond, (uint64_t)(uintptr_t)insns, __ATOMIC_RELAXED);
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    if (n)
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, QEMU_PLUGIN_CB_NO_REGS, (void *)(uintptr_t)n);
}

static void on_guest_exit(qemu_plugin_id_t id, void *userdata) {
    (void)id;
    (void)userdata;
    uint64_t total = beyond, most = 0;
    int threads = 0;
    for (int i = 0; i < MAX_THREADS; i++) {
        if (counts[i].n == 0)
            continue;
        total += counts[i].n;
        if (counts[i].n > most)
            most = counts[i].n;
        threads = i + 1;
    }
    static char line[MAX_THREADS * 21 + 160];
    size_t k = (size_t)snprintf(line, sizeof line, "icount_threads: total=%" PRIu64 " max=%" PRIu64
                                " threads=%d beyond=%" PRIu64 " per=", total, most, threads, beyond);
    for (int i = 0; i < threads && k < sizeof line - 24; i++)
        k += (size_t)snprintf(line + k, sizeof line - k, "%s%" PRIu64, i ? "," : "", counts[i].n);
    snprintf(line + k, sizeof line - k, "\n");
    qemu_plugin_outs(line);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const struct qemu_info_t *info, int argc, char **argv) {
    (void)info;
    (void)argv;
    if (argc > 0) {
        fprintf(stderr, "qemu_icount_threads: takes no arguments\n");
        return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_guest_exit, NULL);
    return 0;
}
