// A store with some methods wrapped (to count, delay or fail calls); the rest passes through.
import type { Store } from '../../src/index.ts';

type Method = (...args: never[]) => unknown;
/** Replacements by method name; each receives the original method, bound to the store. */
export type Wrappers = { [K in keyof Store]?: NonNullable<Store[K]> extends Method ? (original: NonNullable<Store[K]>) => NonNullable<Store[K]> : never };

export function spyStore(inner: Store, wrappers: Wrappers): Store {
  return new Proxy(inner, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (typeof value !== 'function') return value;
      const original = (value as (...a: unknown[]) => unknown).bind(target);
      const wrap = wrappers[prop as keyof Store] as ((o: unknown) => unknown) | undefined;
      return wrap ? wrap(original) : original;
    },
  });
}
