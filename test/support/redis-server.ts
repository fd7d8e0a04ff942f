/** The throwaway redis-server of the test harness: shared with `npm run demo`. */
export { type RedisServer, startRedisServer } from "../../demo/redis-server.js";
