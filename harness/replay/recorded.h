/* recorded.h: a runner observer that holds a replayed snapshot to what it recorded: each recorded
 * segment_alloc and segment_map is paired in order with the model's own (size and place in the event
 * order must agree; expandable addresses translate by their offset in the stream's reservation),
 * every alloc's address is compared (segment-relative, or literally when segments take their recorded
 * addresses), a recorded segment_free or segment_unmap releases the model's counterpart, and at the end the block layout
 * of every segment is compared with the file's final state. */
#ifndef OOMLAB_RECORDED_H
#define OOMLAB_RECORDED_H

#include "alloc/snapshot.h"
#include "run/result.h"
#include "run/runner.h"

struct recorded_observer;

struct recorded_observer *recorded_observer_create(void);
struct run_observer *recorded_observer_base(struct recorded_observer *o);
/* A segment live at trace start: recorded at rec_addr, restored by the model at our_addr. */
int recorded_observer_restored(struct recorded_observer *o, uint64_t rec_addr, uint64_t size, uint64_t our_addr);
/* An expandable reservation live at trace start: recorded from rec_base, restored by the model at our_base. */
int recorded_observer_restored_reservation(struct recorded_observer *o, uint64_t stream, bool small,
                                           uint64_t rec_base, uint64_t our_base);
/* Pairs what is left, compares the final layout with the recorded final segments, and fills *out. 0, or -1
 * (out of memory). */
int recorded_observer_finish(struct recorded_observer *o, struct runner *r, const struct segment_info *final,
                             size_t nfinal, struct recorded_check *out, struct err *e);
void recorded_observer_destroy(struct recorded_observer *o);

#endif
