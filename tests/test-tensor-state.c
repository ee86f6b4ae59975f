/* SPDX-License-Identifier: MIT */
/* test-tensor-state.c - the core's per-tensor plugin state: handles that
 * read back their state, go stale when released one by one or with their
 * scope, are never taken for another tag's, and survive slot reuse.
 */
#include <glib.h>

#include <loom/loom-plugin.h>

static const char tag_a, tag_b;

static void test_lookup(void)
{
	loom_state_scope_t *sc;
	int x = 1, y = 2;
	loom_state_t hx, hy;
	void *out = &x;

	g_assert_cmpint(loom_state_scope_new(&tag_a, &sc), ==, LOOM_OK);
	g_assert_cmpint(loom_state_new(sc, &x, &hx), ==, LOOM_OK);
	g_assert_cmpint(loom_state_new(sc, &y, &hy), ==, LOOM_OK);
	g_assert_cmphex(hx, !=, 0);
	g_assert_cmphex(hx, !=, hy);
	g_assert_cmpint(loom_state_get(hx, &tag_a, &out), ==, LOOM_OK);
	g_assert_true(out == &x);
	g_assert_cmpint(loom_state_get(hy, &tag_a, &out), ==, LOOM_OK);
	g_assert_true(out == &y);
	/* Another plugin's tag does not see it; 0 and junk are no state. */
	g_assert_cmpint(loom_state_get(hx, &tag_b, &out), ==,
			LOOM_E_NOT_FOUND);
	g_assert_null(out);
	g_assert_cmpint(loom_state_get(0, &tag_a, &out), ==, LOOM_E_NOT_FOUND);
	g_assert_cmpint(loom_state_get(UINT64_MAX, &tag_a, &out), ==,
			LOOM_E_NOT_FOUND);
	g_assert_cmpint(loom_state_get((uint64_t)1 << 32 | 0xfffffff0u,
				       &tag_a, &out), ==, LOOM_E_NOT_FOUND);
	loom_state_scope_free(sc);
}

static void test_stale(void)
{
	loom_state_scope_t *sc, *other;
	int x = 1, y = 2, z = 3;
	loom_state_t hx, hy, hz;
	struct loom_tensor t = { 0 };
	void *out;

	g_assert_cmpint(loom_state_scope_new(&tag_a, &sc), ==, LOOM_OK);
	g_assert_cmpint(loom_state_scope_new(&tag_a, &other), ==, LOOM_OK);
	g_assert_cmpint(loom_state_new(sc, &x, &hx), ==, LOOM_OK);
	g_assert_cmpint(loom_state_new(sc, &y, &hy), ==, LOOM_OK);
	t.state = hx;
	g_assert_cmpint(loom_tensor_state_get(&t, &tag_a, &out), ==, LOOM_OK);
	g_assert_true(out == &x);

	/* Released through another scope: ignored. */
	loom_state_release(other, hx);
	g_assert_cmpint(loom_state_get(hx, &tag_a, &out), ==, LOOM_OK);
	/* Released: stale, and stays stale when the slot is reused. */
	loom_state_release(sc, hx);
	g_assert_cmpint(loom_tensor_state_get(&t, &tag_a, &out), ==,
			LOOM_E_STATE);
	g_assert_null(out);
	g_assert_cmpint(loom_state_new(other, &z, &hz), ==, LOOM_OK);
	g_assert_cmphex((uint32_t)hz, ==, (uint32_t)hx); /* the same slot */
	g_assert_cmphex(hz, !=, hx);
	g_assert_cmpint(loom_state_get(hx, &tag_a, &out), ==, LOOM_E_STATE);
	g_assert_cmpint(loom_state_get(hz, &tag_a, &out), ==, LOOM_OK);
	g_assert_true(out == &z);
	/* A second release of the stale handle leaves the new state be. */
	loom_state_release(sc, hx);
	loom_state_release(other, hx);
	g_assert_cmpint(loom_state_get(hz, &tag_a, &out), ==, LOOM_OK);

	/* Freeing a scope makes all its handles stale, and only its. */
	loom_state_scope_free(sc);
	g_assert_cmpint(loom_state_get(hy, &tag_a, &out), ==, LOOM_E_STATE);
	g_assert_cmpint(loom_state_get(hz, &tag_a, &out), ==, LOOM_OK);
	loom_state_scope_free(other);
	g_assert_cmpint(loom_state_get(hz, &tag_a, &out), ==, LOOM_E_STATE);
	loom_state_scope_free(NULL);
}

static void test_errors(void)
{
	loom_state_scope_t *sc;
	loom_state_t h = 7;
	int x;

	g_assert_cmpint(loom_state_scope_new(NULL, &sc), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_state_scope_new(&tag_a, &sc), ==, LOOM_OK);
	g_assert_cmpint(loom_state_new(sc, NULL, &h), ==, LOOM_E_INVAL);
	g_assert_cmphex(h, ==, 7);
	g_assert_cmpint(loom_state_new(NULL, &x, &h), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_state_get(h, &tag_a, NULL), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_tensor_state_get(NULL, &tag_a, (void **)&sc), ==,
			LOOM_E_INVAL);
	loom_state_scope_free(sc);
}

/* Many states across several pages of slots, released in a scattered
 * order, each read back right until it goes. */
static void test_many(void)
{
	enum { N = 10000 };
	static int v[N];
	static loom_state_t h[N];
	loom_state_scope_t *sc;
	void *out;

	g_assert_cmpint(loom_state_scope_new(&tag_b, &sc), ==, LOOM_OK);
	for (int i = 0; i < N; i++)
		g_assert_cmpint(loom_state_new(sc, &v[i], &h[i]), ==, LOOM_OK);
	for (int i = 0; i < N; i += 3)
		loom_state_release(sc, h[i]);
	for (int i = 0; i < N; i++) {
		int rc = loom_state_get(h[i], &tag_b, &out);

		if (i % 3 == 0) {
			g_assert_cmpint(rc, ==, LOOM_E_STATE);
		} else {
			g_assert_cmpint(rc, ==, LOOM_OK);
			g_assert_true(out == &v[i]);
		}
	}
	loom_state_scope_free(sc);
	for (int i = 0; i < N; i++)
		g_assert_cmpint(loom_state_get(h[i], &tag_b, &out), ==,
				LOOM_E_STATE);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/tensor-state/lookup", test_lookup);
	g_test_add_func("/tensor-state/stale", test_stale);
	g_test_add_func("/tensor-state/errors", test_errors);
	g_test_add_func("/tensor-state/many", test_many);
	return g_test_run();
}
