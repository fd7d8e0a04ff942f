/** The fenced lock keeps the lock contract; its token counter is the one key it keeps. */
import { describeLockContract } from "../contract.js";

describeLockContract(
  "fenced-lock",
  (edgelock, name) => edgelock.getFencedLock(name),
  (name) => [`redisson_lock_token:{${name}}`],
);
