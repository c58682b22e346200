/* test_store.c - unit tests of the snapshot store API (lmc_store_*, doc/store.md). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lmc.h"
#include "testutil.h"

#define NSTEPS 12
#define SZ (300000 + 17)

static char g_dir[256];
static unsigned char* g_snap[NSTEPS];

/* float-like snapshots that drift slowly, plus a second file that changes more */
static void make_snaps(void)
{
    tu_rng r;
    tu_seed(&r, 42);
    for (int k = 0; k < NSTEPS; k++) {
        g_snap[k] = (unsigned char*)tu_xmalloc(SZ);
        if (k == 0) for (size_t i = 0; i < SZ; i++) g_snap[k][i] = (unsigned char)(i % 4 == 3 ? 0x3f : tu_u32(&r));
        else {
            memcpy(g_snap[k], g_snap[k - 1], SZ);
            for (int j = 0; j < 3000; j++) g_snap[k][tu_below(&r, SZ)] ^= (unsigned char)(1u << tu_below(&r, 8));
        }
    }
}

static int setup(void** state)
{
    (void)state;
    strcpy(g_dir, "/tmp/lmc-store-test-XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    return 0;
}

static int teardown(void** state)
{
    char cmd[300];
    (void)state;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static char* sub(const char* name)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    return p;
}

/* 1 if (step, name) is the latest snapshot of its name: restored from the cache */
static int is_head(lmc_store* s, int64_t step, const char* name)
{
    for (size_t i = 0; i < lmc_store_count(s); i++) {
        lmc_store_entry e;
        assert_int_equal(lmc_store_get(s, i, &e), 0);
        if (!strcmp(e.name, name) && e.step > step) return 0;
    }
    return 1;
}

static void check_restore(lmc_store* s, int64_t step, const char* name, const unsigned char* want, unsigned max_frames)
{
    unsigned frames = 0;
    size_t n = lmc_store_restore_buffer(s, step, name, NULL, 0, NULL);
    unsigned char* buf;
    assert_false(lmc_is_error(n));
    assert_int_equal(n, SZ);
    buf = (unsigned char*)tu_xmalloc(n);
    assert_int_equal(lmc_get_error(lmc_store_restore_buffer(s, step, name, buf, n - 1, NULL)), LMC_ERR_DST_TOO_SMALL);
    assert_int_equal(lmc_store_restore_buffer(s, step, name, buf, n, &frames), SZ);
    assert_memory_equal(buf, want, SZ);
    if (is_head(s, step, name)) assert_int_equal(frames, 0);   /* copied from the cache */
    else assert_true(frames >= 1 && frames <= max_frames);
    free(buf);
}

static void test_add_restore(void** state)
{
    lmc_store* s = NULL;
    char* d = sub("st");
    (void)state;
    assert_int_equal(lmc_store_init(d), 0);
    assert_int_equal(lmc_get_error(lmc_store_init(d)), LMC_ERR_EXISTS);
    assert_int_equal(lmc_store_open(&s, d), 0);
    lmc_store_set_param(s, LMC_STORE_P_FSYNC, 0);
    /* as many threads as the coders take, no more (1024 were accepted,
     * and every add then failed at the coder's set_param) */
    assert_int_equal(lmc_get_error(lmc_store_set_param(s, LMC_STORE_P_THREADS, LMC_THREADS_MAX + 1)), LMC_ERR_PARAM);
    assert_int_equal(lmc_get_error(lmc_store_set_param(s, LMC_STORE_P_THREADS, 0)), LMC_ERR_PARAM);
    assert_int_equal(lmc_store_set_param(s, LMC_STORE_P_THREADS, LMC_THREADS_MAX), 0);
    assert_int_equal(lmc_store_set_param(s, LMC_STORE_P_THREADS, 1), 0);
    assert_int_equal(lmc_store_last_step(s), -1);
    for (int k = 0; k < NSTEPS; k++) {
        size_t r = lmc_store_add_buffer(s, g_snap[k], SZ, -1, 4, "w");
        assert_false(lmc_is_error(r));
        r = lmc_store_add_buffer(s, g_snap[NSTEPS - 1 - k], SZ, k, 4, "dir/v");
        assert_false(lmc_is_error(r));
    }
    assert_int_equal(lmc_store_count(s), 2 * NSTEPS);
    assert_int_equal(lmc_store_last_step(s), NSTEPS - 1);
    /* duplicate / older step refused */
    assert_int_equal(lmc_get_error(lmc_store_add_buffer(s, g_snap[0], SZ, 3, 4, "w")), LMC_ERR_EXISTS);
    assert_int_equal(lmc_get_error(lmc_store_add_buffer(s, g_snap[0], SZ, 99, 4, "../x")), LMC_ERR_PARAM);
    assert_int_equal(lmc_get_error(lmc_store_add_buffer(s, g_snap[0], SZ, 99, 4, NULL)), LMC_ERR_PARAM);
    for (size_t i = 0; i < lmc_store_count(s); i++) {
        lmc_store_entry e;
        assert_int_equal(lmc_store_get(s, i, &e), 0);
        assert_true(e.chain_depth <= 3);
        assert_int_equal(e.keyframe, e.step % 4 == 0);
        assert_int_equal(e.content_size, SZ);
        if (!strcmp(e.name, "w")) {
            assert_true(e.content_hash == lmc_hash64(g_snap[e.step], SZ));
            if (!e.keyframe) assert_true(e.ratio > 1.5);  /* deltas of slow drift compress well */
        }
    }
    for (int k = 0; k < NSTEPS; k++) {
        check_restore(s, k, "w", g_snap[k], 4);
        check_restore(s, k, "dir/v", g_snap[NSTEPS - 1 - k], 4);
    }
    assert_int_equal(lmc_get_error(lmc_store_restore_buffer(s, 0, NULL, NULL, 0, NULL)), LMC_ERR_PARAM); /* two files */
    assert_int_equal(lmc_get_error(lmc_store_restore_buffer(s, 77, "w", NULL, 0, NULL)), LMC_ERR_NOT_FOUND);
    assert_int_equal(lmc_store_verify(s), 0);
    /* to a file */
    {
        FILE* f;
        unsigned char* buf = (unsigned char*)tu_xmalloc(SZ + 1);
        assert_int_equal(lmc_store_restore_file(s, 5, "w", sub("out.bin"), NULL), SZ);
        f = fopen(sub("out.bin"), "rb");
        assert_non_null(f);
        assert_int_equal(fread(buf, 1, SZ + 1, f), SZ);
        fclose(f);
        assert_memory_equal(buf, g_snap[5], SZ);
        free(buf);
    }
    lmc_store_close(s);
}

static void test_rm_prune(void** state)
{
    lmc_store* s = NULL;
    char* d = sub("st");
    size_t r;
    (void)state;
    assert_int_equal(lmc_store_open(&s, d), 0);
    r = lmc_store_rm(s, 5);  /* a delta in the middle of w's chain */
    assert_int_equal(r, 2);
    r = lmc_store_rm(s, 8);  /* a keyframe */
    assert_int_equal(r, 2);
    assert_int_equal(lmc_get_error(lmc_store_rm(s, 8)), LMC_ERR_NOT_FOUND);
    assert_int_equal(lmc_store_verify(s), 0);
    for (int k = 0; k < NSTEPS; k++) {
        if (k == 5 || k == 8) continue;
        check_restore(s, k, "w", g_snap[k], 4);
        check_restore(s, k, "dir/v", g_snap[NSTEPS - 1 - k], 4);
    }
    r = lmc_store_prune(s, 3);
    assert_int_equal(r, 2 * (NSTEPS - 2 - 3));
    assert_int_equal(lmc_store_count(s), 6);
    assert_int_equal(lmc_store_verify(s), 0);
    for (size_t i = 0; i < lmc_store_count(s); i++) {
        lmc_store_entry e;
        lmc_store_get(s, i, &e);
        assert_true(e.step >= NSTEPS - 3);
        if (e.step == NSTEPS - 3) assert_true(e.keyframe);
        check_restore(s, e.step, e.name, !strcmp(e.name, "w") ? g_snap[e.step] : g_snap[NSTEPS - 1 - e.step], 4);
    }
    assert_int_equal(lmc_store_prune(s, 100), 0);
    assert_int_equal(lmc_get_error(lmc_store_prune(s, 0)), LMC_ERR_PARAM);
    lmc_store_close(s);
}

static void test_corruption(void** state)
{
    lmc_store* s = NULL;
    char* d = sub("st");
    lmc_store_entry e;
    char path[600];
    FILE* f;
    (void)state;
    assert_int_equal(lmc_store_open(&s, d), 0);
    lmc_store_get(s, 1, &e);
    snprintf(path, sizeof path, "%s/%s", d, e.frame);
    f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, (long)(e.frame_size / 2), SEEK_SET);
    {
        int c = fgetc(f);
        fseek(f, (long)(e.frame_size / 2), SEEK_SET);
        fputc(c ^ 0x40, f);
    }
    fclose(f);
    {
        size_t r = lmc_store_verify(s);
        assert_true(lmc_is_error(r));
        assert_int_equal(lmc_get_error(r), LMC_ERR_CHECKSUM);
        assert_non_null(strstr(lmc_store_last_error(s), e.frame));
    }
    lmc_store_close(s);
}

/* Format 5 frames' footers hash the chunks' hashes, not the file, so the
 * store checks each decoded frame against the manifest's hash of the file:
 * a frame file replaced by another valid frame of the same size (random
 * bytes, stored raw) must not restore as the other content. */
static void test_swapped_frame(void** state)
{
    lmc_store* s = NULL;
    char* d = sub("swap");
    lmc_store_entry ea, eb;
    char pa[600], pb[600];
    size_t const n = 200000;
    unsigned char* const a = (unsigned char*)tu_xmalloc(n);
    unsigned char* const b = (unsigned char*)tu_xmalloc(n);
    unsigned char* const out = (unsigned char*)tu_xmalloc(n);
    (void)state;
    tu_fill_random(a, n, 1);
    tu_fill_random(b, n, 2);
    assert_int_equal(lmc_store_init(d), 0);
    assert_int_equal(lmc_store_open(&s, d), 0);
    lmc_store_set_param(s, LMC_STORE_P_FSYNC, 0);
    assert_false(lmc_is_error(lmc_store_add_buffer(s, a, n, 0, 1, "a")));
    assert_false(lmc_is_error(lmc_store_add_buffer(s, b, n, 0, 1, "b")));
    assert_int_equal(lmc_store_get(s, 0, &ea), 0);
    assert_int_equal(lmc_store_get(s, 1, &eb), 0);
    assert_string_equal(ea.name, "a");
    assert_int_equal(ea.frame_size, eb.frame_size);
    assert_int_equal(lmc_store_restore_buffer(s, 0, "a", out, n, NULL), n);
    assert_memory_equal(out, a, n);
    snprintf(pa, sizeof pa, "%s/%s", d, ea.frame);
    snprintf(pb, sizeof pb, "%s/%s", d, eb.frame);
    {
        size_t fn = 0;
        uint8_t* const fb = tu_read_file(pb, &fn);
        FILE* const f = fopen(pa, "wb");
        assert_non_null(fb);
        assert_non_null(f);
        assert_int_equal(fwrite(fb, 1, fn, f), fn);
        fclose(f);
        free(fb);
    }
    {
        /* the head comes from the cache, which still holds a: right bytes;
         * verify decodes the frames and finds the swap */
        unsigned frames = 9;
        size_t r = lmc_store_restore_buffer(s, 0, "a", out, n, &frames);
        assert_int_equal(r, n);
        assert_int_equal(frames, 0);
        assert_memory_equal(out, a, n);
        assert_int_equal(lmc_get_error(lmc_store_verify(s)), LMC_ERR_STORE);
        /* without the cache the frame is decoded, checked, refused */
        snprintf(pa, sizeof pa, "%s/cache/%016llx", d, (unsigned long long)lmc_hash64("a", 1));
        assert_int_equal(unlink(pa), 0);
        r = lmc_store_restore_buffer(s, 0, "a", out, n, NULL);
        assert_int_equal(lmc_get_error(r), LMC_ERR_STORE);
        assert_non_null(strstr(lmc_store_last_error(s), "does not hold the content"));
    }
    lmc_store_close(s);
    free(a); free(b); free(out);
}

static void write_text(const char* path, const char* text)
{
    FILE* f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Contents of several of the store's 8 MiB windows, bf16 weights drifting,
 * through the API: the store drops pages of its own files behind its work
 * (contents decoded on the way, the restored file) but never the caller's
 * memory (add_buffer's source, restore_buffer's destination). */
static void test_large_contents(void** state)
{
    enum { BIG = (20 << 20) + 334, NB = 4 };
    unsigned char* v[NB];
    unsigned char* keep[NB];
    lmc_store* s = NULL;
    char d[512], out_path[512];
    (void)state;
    snprintf(d, sizeof d, "%s", sub("big"));
    snprintf(out_path, sizeof out_path, "%s", sub("big.out"));
    for (int k = 0; k < NB; k++) {
        v[k] = (unsigned char*)tu_xmalloc(BIG);
        if (k == 0) tu_fill_gauss(v[0], BIG, 2, 7);
        else tu_perturb(v[k], v[k - 1], BIG, 2, 3, 100 + (uint64_t)k);
        keep[k] = (unsigned char*)tu_xmalloc(BIG);
        memcpy(keep[k], v[k], BIG);
    }
    for (int threads = 1; threads <= 2; threads++) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
        assert_int_equal(system(cmd), 0);
        assert_int_equal(lmc_store_init(d), 0);
        assert_int_equal(lmc_store_open(&s, d), 0);
        lmc_store_set_param(s, LMC_STORE_P_FSYNC, 0);
        lmc_store_set_param(s, LMC_STORE_P_THREADS, threads);
        if (threads == 2) lmc_store_set_param(s, LMC_STORE_P_CACHE, 0);   /* deltas decode their parent chain */
        for (int k = 0; k < NB; k++) {
            size_t const r = lmc_store_add_buffer(s, v[k], BIG, k, 10, "m");
            assert_false(lmc_is_error(r));
            assert_true(r < BIG / 2 || k == 0);
            assert_memory_equal(v[k], keep[k], BIG);   /* the source is untouched */
        }
        {
            unsigned char* out = (unsigned char*)tu_xmalloc(BIG);
            unsigned frames = 0;
            assert_int_equal(lmc_store_restore_buffer(s, NB - 1, "m", out, BIG, &frames), BIG);
            assert_int_equal(frames, threads == 1 ? 0 : NB);   /* the head: from the cache when there is one */
            assert_memory_equal(out, keep[NB - 1], BIG);
            if (threads == 1) {
                /* a cache that no longer holds the head's bytes is not used */
                char cp[600];
                FILE* cf;
                snprintf(cp, sizeof cp, "%s/cache/%016llx", d, (unsigned long long)lmc_hash64("m", 1));
                cf = fopen(cp, "r+b");
                assert_non_null(cf);
                fseek(cf, BIG / 2, SEEK_SET);
                fputc(0x55 ^ keep[NB - 1][BIG / 2], cf);
                fclose(cf);
                memset(out, 0, BIG);
                assert_int_equal(lmc_store_restore_buffer(s, NB - 1, "m", out, BIG, &frames), BIG);
                assert_int_equal(frames, NB);
                assert_memory_equal(out, keep[NB - 1], BIG);
            }
            free(out);
        }
        {
            size_t n = 0;
            uint8_t* f;
            size_t const r = lmc_store_restore_file(s, 2, "m", out_path, NULL);
            if (r != BIG) fprintf(stderr, "restore_file: %s\n", lmc_store_last_error(s));
            assert_int_equal(r, BIG);
            f = tu_read_file(out_path, &n);
            assert_int_equal(n, BIG);
            assert_memory_equal(f, keep[2], BIG);
            free(f);
        }
        {
            /* into an open file that held more than the content: sized to it */
            char tmpl[512];
            int fd, pfd[2];
            unsigned frames = 0;
            unsigned char* junk = (unsigned char*)tu_xmalloc(BIG + 4096);
            size_t n = 0;
            uint8_t* f;
            snprintf(tmpl, sizeof tmpl, "%s", sub("fdout-XXXXXX"));
            fd = mkstemp(tmpl);
            assert_true(fd >= 0);
            memset(junk, 0xA5, BIG + 4096);
            assert_int_equal(write(fd, junk, BIG + 4096), BIG + 4096);
            free(junk);
            assert_int_equal(lmc_store_restore_fd(s, 1, "m", fd, &frames), BIG);
            assert_int_equal(frames, 2);
            assert_int_equal(lmc_get_error(lmc_store_restore_fd(s, 9, "m", fd, NULL)), LMC_ERR_NOT_FOUND);
            close(fd);
            f = tu_read_file(tmpl, &n);
            assert_int_equal(n, BIG);
            assert_memory_equal(f, keep[1], BIG);
            free(f);
            unlink(tmpl);
            assert_int_equal(lmc_get_error(lmc_store_restore_fd(s, 1, "m", -1, NULL)), LMC_ERR_PARAM);
            assert_int_equal(pipe(pfd), 0);
            assert_int_equal(lmc_get_error(lmc_store_restore_fd(s, 1, "m", pfd[1], NULL)), LMC_ERR_PARAM);
            close(pfd[0]); close(pfd[1]);
        }
        assert_int_equal(lmc_store_verify(s), 0);
        assert_int_equal(lmc_store_rm(s, 1), 1);   /* step 2 re-encoded against step 0 */
        {
            unsigned char* out = (unsigned char*)tu_xmalloc(BIG);
            assert_int_equal(lmc_store_restore_buffer(s, 3, "m", out, BIG, NULL), BIG);
            assert_memory_equal(out, keep[3], BIG);
            assert_int_equal(lmc_store_restore_buffer(s, 2, "m", out, BIG, NULL), BIG);
            assert_memory_equal(out, keep[2], BIG);
            free(out);
        }
        assert_int_equal(lmc_store_verify(s), 0);
        lmc_store_close(s);
        s = NULL;
    }
    for (int k = 0; k < NB; k++) { free(v[k]); free(keep[k]); }
}

static void test_hostile_manifest(void** state)
{
    static const char* bad[] = {
        "",
        "not json",
        "[]",
        "{\"format\":\"zip\",\"version\":1,\"keyframe_every\":3,\"next_id\":0,\"entries\":[]}",
        "{\"format\":\"lmc-store\",\"version\":99,\"keyframe_every\":3,\"next_id\":0,\"entries\":[]}",
        "{\"format\":\"lmc-store\",\"version\":1,\"keyframe_every\":0,\"next_id\":0,\"entries\":[]}",
        "{\"format\":\"lmc-store\",\"version\":1,\"keyframe_every\":3,\"next_id\":0,\"entries\":{}}",
        "{\"format\":\"lmc-store\",\"version\":1,\"keyframe_every\":3,\"next_id\":5,\"entries\":[{\"step\":1}]}",
        /* path traversal in a frame or a name */
        "{\"format\":\"lmc-store\",\"version\":1,\"keyframe_every\":3,\"next_id\":5,\"entries\":[{\"step\":1,\"name\":\"a\","
        "\"frame\":\"../../etc/passwd\",\"keyframe\":true,\"parent\":null,\"depth\":0,\"content_size\":1,"
        "\"content_hash\":\"0000000000000000\",\"frame_size\":100}]}",
        "{\"format\":\"lmc-store\",\"version\":1,\"keyframe_every\":3,\"next_id\":5,\"entries\":[{\"step\":1,\"name\":\"../a\","
        "\"frame\":\"frames/0000000000000001.lmc\",\"keyframe\":true,\"parent\":null,\"depth\":0,\"content_size\":1,"
        "\"content_hash\":\"0000000000000000\",\"frame_size\":100}]}",
        /* a delta whose parent does not exist */
        "{\"format\":\"lmc-store\",\"version\":1,\"keyframe_every\":3,\"next_id\":5,\"entries\":[{\"step\":2,\"name\":\"a\","
        "\"frame\":\"frames/0000000000000001.lmc\",\"keyframe\":false,\"parent\":1,\"depth\":1,\"content_size\":1,"
        "\"content_hash\":\"0000000000000000\",\"frame_size\":100}]}",
        /* duplicate frame */
        "{\"format\":\"lmc-store\",\"version\":1,\"keyframe_every\":3,\"next_id\":5,\"entries\":["
        "{\"step\":1,\"name\":\"a\",\"frame\":\"frames/0000000000000001.lmc\",\"keyframe\":true,\"parent\":null,\"depth\":0,"
        "\"content_size\":1,\"content_hash\":\"0000000000000000\",\"frame_size\":100},"
        "{\"step\":1,\"name\":\"b\",\"frame\":\"frames/0000000000000001.lmc\",\"keyframe\":true,\"parent\":null,\"depth\":0,"
        "\"content_size\":1,\"content_hash\":\"0000000000000000\",\"frame_size\":100}]}",
        /* negative size, huge depth */
        "{\"format\":\"lmc-store\",\"version\":1,\"keyframe_every\":3,\"next_id\":5,\"entries\":[{\"step\":1,\"name\":\"a\","
        "\"frame\":\"frames/0000000000000001.lmc\",\"keyframe\":true,\"parent\":null,\"depth\":0,\"content_size\":-1,"
        "\"content_hash\":\"0000000000000000\",\"frame_size\":100}]}",
    };
    char* d = sub("hostile");
    char mpath[600];
    (void)state;
    assert_int_equal(lmc_store_init(d), 0);
    snprintf(mpath, sizeof mpath, "%s/manifest.json", d);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lmc_store* s = (lmc_store*)1;
        size_t r;
        write_text(mpath, bad[i]);
        r = lmc_store_open(&s, d);
        assert_true(lmc_is_error(r));
        assert_null(s);
        assert_true(lmc_get_error(r) == LMC_ERR_STORE || lmc_get_error(r) == LMC_ERR_VERSION);
    }
    {
        lmc_store* s = NULL;
        assert_int_equal(lmc_get_error(lmc_store_open(&s, sub("nonexistent"))), LMC_ERR_STORE);
        assert_int_equal(lmc_get_error(lmc_store_open(&s, g_dir)), LMC_ERR_STORE);  /* no manifest */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_restore),
        cmocka_unit_test(test_rm_prune),
        cmocka_unit_test(test_corruption),
        cmocka_unit_test(test_hostile_manifest),
        cmocka_unit_test(test_swapped_frame),
        cmocka_unit_test(test_large_contents),
    };
    int r;
    make_snaps();
    r = cmocka_run_group_tests(tests, setup, teardown);
    for (int k = 0; k < NSTEPS; k++) free(g_snap[k]);
    return r;
}
