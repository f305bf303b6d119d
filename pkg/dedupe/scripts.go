package dedupe

import "github.com/redis/go-redis/v9"

// The Lua scripts behind every state transition. Conventions:
//
//   - KEYS[1] is the window hash, KEYS[2] the claim key, KEYS[3] (Claim
//     only) the job's token counter; all share one hash tag.
//   - Tokens are stored, passed and compared as decimal strings, so no
//     token ever goes through a float.
//   - now_ms comes from the server's TIME.
//   - Result codes: resOK, resDone (already done), resFenced.

const luaNow = `
local t = redis.call('TIME')
local now_ms = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
`

// claimScript: ARGV[1] owner, ARGV[2] claim TTL ms, ARGV[3] retention ms.
// Returns {outcome, token, attempts, holder, claim pttl ms}.
var claimScript = redis.NewScript(`
local w = redis.call('HMGET', KEYS[1], 'status', 'token', 'attempts', 'holder')
local attempts = tonumber(w[3]) or 0
if w[1] == 'done' or w[1] == 'dead' then
  return {1, w[2] or '0', attempts, w[4] or '', 0}
end
local c = redis.call('GET', KEYS[2])
if c then
  local sep = string.find(c, '|', 1, true) or (#c + 1)
  local pttl = redis.call('PTTL', KEYS[2])
  if pttl < 0 then pttl = 0 end
  return {2, string.sub(c, 1, sep - 1), attempts, string.sub(c, sep + 1), pttl}
end
` + luaNow + `
local token = string.format('%d', redis.call('INCR', KEYS[3]))
attempts = redis.call('HINCRBY', KEYS[1], 'attempts', 1)
redis.call('SET', KEYS[2], token .. '|' .. ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[1], 'status', 'running', 'token', token, 'holder', ARGV[1], 'updated_ms', now_ms)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {0, token, attempts, ARGV[1], tonumber(ARGV[2])}
`)

// extendScript: ARGV[1] token, ARGV[2] claim TTL ms, ARGV[3] retention ms.
// It re-creates an expired claim key as long as nobody re-claimed.
var extendScript = redis.NewScript(`
local w = redis.call('HMGET', KEYS[1], 'status', 'token', 'holder')
if w[1] == 'done' or w[1] == 'dead' then return 1 end
if w[1] ~= 'running' or w[2] ~= ARGV[1] then return 2 end
redis.call('SET', KEYS[2], ARGV[1] .. '|' .. (w[3] or ''), 'PX', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 0
`)

// completeScript: ARGV[1] token, ARGV[2] retention ms.
var completeScript = redis.NewScript(`
local w = redis.call('HMGET', KEYS[1], 'status', 'token')
if w[1] == 'done' or w[1] == 'dead' then return 1 end
if w[1] ~= 'running' or w[2] ~= ARGV[1] then return 2 end
` + luaNow + `
redis.call('HSET', KEYS[1], 'status', 'done', 'updated_ms', now_ms)
redis.call('DEL', KEYS[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 0
`)

// releaseScript: ARGV[1] token, ARGV[2] reason, ARGV[3] retention ms.
// Releasing twice with the same token is a no-op the second time.
var releaseScript = redis.NewScript(`
local w = redis.call('HMGET', KEYS[1], 'status', 'token')
if w[1] == 'done' or w[1] == 'dead' then return 1 end
if w[2] ~= ARGV[1] then return 2 end
if w[1] == 'failed' then return 0 end
if w[1] ~= 'running' then return 2 end
` + luaNow + `
redis.call('HSET', KEYS[1], 'status', 'failed', 'last_error', ARGV[2], 'updated_ms', now_ms)
redis.call('DEL', KEYS[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 0
`)

// deadScript: ARGV[1] token, ARGV[2] reason, ARGV[3] retention ms. It
// settles a window that was dead-lettered: terminal like done, so a
// redelivered record of it is skipped instead of run again.
var deadScript = redis.NewScript(`
local w = redis.call('HMGET', KEYS[1], 'status', 'token')
if w[1] == 'done' or w[1] == 'dead' then return 1 end
if w[2] ~= ARGV[1] then return 2 end
if w[1] ~= 'running' and w[1] ~= 'failed' then return 2 end
` + luaNow + `
redis.call('HSET', KEYS[1], 'status', 'dead', 'last_error', ARGV[2], 'updated_ms', now_ms)
redis.call('DEL', KEYS[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 0
`)

// stateScript returns nil when there is no record, otherwise
// {status, token, attempts, holder, updated_ms, last_error, claim pttl ms}.
var stateScript = redis.NewScript(`
local w = redis.call('HMGET', KEYS[1], 'status', 'token', 'attempts', 'holder', 'updated_ms', 'last_error')
if not w[1] then return false end
local pttl = redis.call('PTTL', KEYS[2])
if pttl < 0 then pttl = 0 end
return {w[1], w[2] or '0', tonumber(w[3]) or 0, w[4] or '', tonumber(w[5]) or 0, w[6] or '', pttl}
`)

const (
	resOK     = 0
	resDone   = 1
	resFenced = 2
)
