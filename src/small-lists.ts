/**
 * @module small-lists
 * Internal: not part of the public API (the package exports only its index modules).
 * Removal from a short array kept in insertion order, for the per-run collections that hold one
 * or two items at a time and empty on every step (the attempts in progress, the results being
 * handed to the code). A `Set` that empties reallocates its hash table (V8 shrinks it on the
 * delete that leaves it empty, and grows it again on the next add), so a run paid two table
 * allocations a step for each such set; an array keeps its backing store.
 */

/**
 * Removes the first `item` of `list` in place, keeping the others' order; whether it was there.
 * Items leave mostly in the order they came (the first attempt started ends first, results are
 * handed over in order): the first item is taken with `shift`, which V8 does for a long array by
 * trimming its front, so a run with thousands of steps in flight does not pay for each removal in
 * their number.
 */
export function removeItem<T>(list: T[], item: T): boolean {
  const at = list.indexOf(item);
  if (at < 0) return false;
  if (at === 0) {
    list.shift();
    return true;
  }
  for (let i = at + 1; i < list.length; i++) list[i - 1] = list[i] as T;
  list.pop();
  return true;
}
