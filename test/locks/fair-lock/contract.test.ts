/** The fair lock keeps the lock contract, whether its waiters block or poll. */
import { describeLockContract } from "../contract.js";

describeLockContract("fair-lock", (edgelock, name) => edgelock.getFairLock(name));
