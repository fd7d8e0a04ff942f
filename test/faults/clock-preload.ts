/**
 * Preload for client child processes (`node --import tsx --import ./clock-preload.ts`): moves
 * this process's wall clock. A real client whose clock is stepped (NTP, a VM resumed, an operator)
 * sees exactly this: `Date.now()` and `new Date()` jump, the monotonic clock
 * (`performance.now()`, timers) does not. No real part can step one process's clock without
 * stepping the whole machine's, so this is the one fake of the fault suite.
 * `globalThis.setClockOffset(ms)` sets the offset from the real clock.
 */
const RealDate = Date;
const realNow = RealDate.now.bind(RealDate);
let offset = 0;

class OffsetDate extends RealDate {
  constructor(...args: unknown[]) {
    if (args.length === 0) super(realNow() + offset);
    else super(...(args as [string | number | Date]));
  }

  static override now(): number {
    return realNow() + offset;
  }
}

globalThis.Date = OffsetDate as DateConstructor;
(globalThis as { setClockOffset?: (ms: number) => void }).setClockOffset = (ms: number) => {
  offset = ms;
};
