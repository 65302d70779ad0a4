// The per-run lists that replace sets on the step path: an item leaves from wherever it is, the
// others keep their order (the writer hands results over in `done` order), and a missing item is
// reported, not removed in its place.
import { describe, expect, it } from 'vitest';
import { removeItem } from '../src/small-lists.ts';

describe('removeItem', () => {
  it('removes an item from the front, the middle or the end and keeps the order of the rest', () => {
    const list = ['a', 'b', 'c', 'd', 'e'];
    expect(removeItem(list, 'a')).toBe(true);
    expect(list).toEqual(['b', 'c', 'd', 'e']);
    expect(removeItem(list, 'd')).toBe(true);
    expect(list).toEqual(['b', 'c', 'e']);
    expect(removeItem(list, 'e')).toBe(true);
    expect(list).toEqual(['b', 'c']);
  });

  it('removes only the first of two equal items and answers false for one that is not there', () => {
    const x = { id: 1 };
    const list = [x, { id: 2 }, x];
    expect(removeItem(list, x)).toBe(true);
    expect(list).toEqual([{ id: 2 }, x]);
    expect(removeItem(list, { id: 1 })).toBe(false);
    expect(list).toHaveLength(2);
  });

  it('empties a list one item at a time, in any order, and fills it again', () => {
    const list: number[] = [];
    for (let i = 0; i < 1000; i++) list.push(i);
    for (let i = 999; i >= 500; i--) expect(removeItem(list, i)).toBe(true);
    for (let i = 0; i < 500; i++) expect(removeItem(list, i)).toBe(true);
    expect(list).toEqual([]);
    list.push(7);
    expect(list).toEqual([7]);
  });
});
