/**
 * The write side of a read-write lock keeps the lock contract (the read side shares, so the
 * contract's exclusion steps do not apply to it: read-write-lock.test.ts covers it).
 */
import { describeLockContract } from "../contract.js";

describeLockContract("write-lock", (edgelock, name) => edgelock.getReadWriteLock(name).writeLock());
