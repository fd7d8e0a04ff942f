/**
 * The wall clock the explorer's clients read, which a run may step back (as NTP or a resumed VM
 * does), and the real one the explorer itself keeps time with. The clients run in this process,
 * so a step is one of `Date.now`: their timers, which run on the monotonic clock, are not moved.
 * Redis's clock (`TIME`, the keys' expiries) is never stepped.
 */

const wallClock = Date.now;
let offset = 0;

/** Real epoch ms, whatever steps the clients' clock took. */
export const realNow = (): number => wallClock.call(Date);

/** How far the clients' clock is behind the real one now, in ms. */
export const clockOffset = (): number => offset;

/** Steps the clients' wall clock back by `ms` more. */
export function stepClockBack(ms: number): void {
  offset += ms;
  const behind = offset;
  Date.now = () => wallClock.call(Date) - behind;
}

/** Puts the clients' wall clock right again. */
export function restoreClock(): void {
  offset = 0;
  Date.now = wallClock;
}

/** `at`, read on the clients' clock now (e.g. a lease's `expiresAt`), as real epoch ms. */
export const toReal = (at: number): number => at + offset;
