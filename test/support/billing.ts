/** The bench's bill counter, for the budget tests (test/billing.test.ts). */
export * from "../../bench/billing.js";
