/* qemu_tbcount.c: a QEMU TCG plugin for tools/arm_funcprof.py. Counts the executions of
 * every translation block and writes "vaddr instructions executions" (hex, decimal,
 * decimal) per block executed at least once to the file given as out=PATH at exit.
 * Like edgert/data/qemu_icount.c it includes no QEMU header: it declares the few plugin
 * API (version 1, QEMU 4.2 to 8.2) functions it uses itself. Apache-2.0, as edgert. */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))
typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;
struct qemu_plugin_tb;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 = 0 };
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, void (*cb)(qemu_plugin_id_t, struct qemu_plugin_tb *));
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, void (*cb)(qemu_plugin_id_t, void *), void *userdata);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op, void *ptr,
                                              uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;
typedef struct { uint64_t va, n, cnt; } rec;
enum { BLK = 4096 };
typedef struct blk { struct blk *next; size_t used; rec r[BLK]; } blk;
static blk *head;
static char outpath[256] = "pcprof.txt";
static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    if (!head || head->used == BLK) { blk *b = calloc(1, sizeof *b); b->next = head; head = b; }
    rec *r = &head->r[head->used++];
    r->va = qemu_plugin_tb_vaddr(tb); r->n = qemu_plugin_tb_n_insns(tb);
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &r->cnt, 1);
}
static void at_exit(qemu_plugin_id_t id, void *p) {
    FILE *f = fopen(outpath, "w");
    for (blk *b = head; b; b = b->next)
        for (size_t i = 0; i < b->used; i++)
            if (b->r[i].cnt) fprintf(f, "%" PRIx64 " %" PRIu64 " %" PRIu64 "\n", b->r[i].va, b->r[i].n, b->r[i].cnt);
    fclose(f);
}
QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (!strncmp(argv[i], "out=", 4)) snprintf(outpath, sizeof outpath, "%s", argv[i] + 4);
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
