/*
 * test_device_events.c - the devices' event pools (core/src/base/device.c)
 * on the sim: events handed back for a device that has no pool are
 * destroyed, exactly the n named and no neighbour past them; the events a
 * pool holds are destroyed by mori__device_release_all, so that none
 * outlives the library's teardown.  The sim answers a destroyed event as
 * unknown, which is how each case sees what became of an event.
 */
#include "mori_cmocka.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "mori/hip_shim.h"

/* hipEventQuery's answer about ev: hipSuccess for a live event (never
 * recorded, so complete), an error for one the sim no longer knows. */
static int live(hipEvent_t ev) { return mori_hipEventQuery(ev) == hipSuccess; }

static void assert_destroyed(hipEvent_t ev) {
  hipError_t e = mori_hipEventQuery(ev);
  if (e == hipSuccess || strstr(mori_shim_message(), "unknown or destroyed event") == NULL)
    fail_msg("event %p is still live (hipEventQuery: %s, \"%s\")", (void *)ev,
             mori_hipGetErrorName(e), mori_shim_message());
}

/* Three events; only the first two are handed back, for a device out of
 * range: they are destroyed, the third is the caller's and stays.  No
 * public call gets here (the watchdog's device is a block's, always in
 * range), so the put is called directly: a read past evs[n) would go
 * unseen until some caller hands a device with no pool. */
static void events_of_no_pool_are_destroyed_and_no_more(void **s) {
  (void)s;
  const int devices[] = {-1, 256}; /* the pools are of devices 0 to 255 */
  for (size_t d = 0; d < sizeof devices / sizeof devices[0]; d++) {
    int device = devices[d];
    hipEvent_t ev[3];
    for (int i = 0; i < 3; i++)
      assert_int_equal(mori_hipEventCreateWithFlags(&ev[i], hipEventDisableTiming), hipSuccess);
    mori__device_events_put(device, ev, 2);
    assert_destroyed(ev[0]);
    assert_destroyed(ev[1]);
    if (!live(ev[2]))
      fail_msg("device %d: the event past the two handed back was destroyed: %s", device,
               mori_shim_message());
    assert_int_equal(mori_hipEventDestroy(ev[2]), hipSuccess);
  }
}

/* Events taken from device 0's pool and handed back stay live in the pool
 * (a later get takes them again) until release_all destroys them. */
static void release_all_destroys_the_pooled_events(void **s) {
  (void)s;
  hipEvent_t ev[3] = {NULL, NULL, NULL}, again[3] = {NULL, NULL, NULL};
  assert_int_equal(mori__device_events_get(0, ev, 3), 0);
  mori__device_events_put(0, ev, 3);
  for (int i = 0; i < 3; i++) assert_true(live(ev[i]));
  assert_int_equal(mori__device_events_get(0, again, 3), 0);
  for (int i = 0; i < 3; i++)
    assert_true(again[i] == ev[0] || again[i] == ev[1] || again[i] == ev[2]);
  mori__device_events_put(0, again, 3);
  mori__device_release_all();
  for (int i = 0; i < 3; i++) assert_destroyed(ev[i]);
}

int main(int argc, char **argv) {
  setenv("MORI_SIM_ARCH", "gfx950", 1);
  unsetenv("MORI_SIM_QUIRKS");
  unsetenv("MORI_SIM_DEVICES");
  if (mori_shim_select("sim") != 0) {
    fprintf(stderr, "cannot start the sim: %s\n", mori_shim_message());
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(events_of_no_pool_are_destroyed_and_no_more),
      cmocka_unit_test(release_all_destroys_the_pooled_events),
  };
  return mori_run_tests(argc, argv, tests);
}
