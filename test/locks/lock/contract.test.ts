/** The reentrant lock keeps the lock contract. */
import { describeLockContract } from "../contract.js";

describeLockContract("lock", (edgelock, name) => edgelock.getLock(name));
