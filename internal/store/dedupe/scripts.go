package dedupe

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts behind every state transition. Every script takes a
// batch: the hashes of one or more windows of ONE job (they share one hash
// tag, so one Redis Cluster slot), and handles each window atomically and
// in order; a single-window call is a batch of one. Conventions:
//
//   - A window is one hash: status, token, attempts, holder, updated_ms,
//     last_error and claim_until_ms. The live claim is not a key of its
//     own: it is the pair (token, holder) while status is "running" and
//     the server's TIME is before claim_until_ms. So a claim costs HMGET,
//     HSET and PEXPIRE, and expiry is judged by the one server clock, as
//     PX would be.
//   - Tokens are stored, passed and compared as decimal strings, so no
//     token ever goes through a float.
//   - Times come from the server's TIME, read once per script call.
//   - Replies are compact: a claim batch returns one integer per claimed
//     window and a short string per other one; a compare-and-set batch
//     returns one string of result digits (resOK, resDone, resFenced).
//   - A claim or an extension sets the hash's TTL to Retention + ClaimTTL
//     (hold ms), so the record outlives the claim it holds, and it still
//     lives at least Retention when the window completes while the claim
//     is live: then Complete writes no PEXPIRE. Any other transition
//     (completing after the claim expired, release, dead letter, unclaim)
//     sets the TTL to Retention. So a record lives at least Retention,
//     and at most Retention + ClaimTTL, after its last transition.

// luaNow reads the server's time once per script call.
const luaNow = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_s = string.format('%d', now)
`

// fenceLua reads the store epoch's arguments, ARGV[4..6] of every script
// that claims (see epoch.go): the token floor (the epoch << EpochShift,
// "0" for a store without an epoch), the epoch marker's key ("" when the
// script may not read it: a Redis Cluster, where it lives in another slot)
// and the epoch the caller proved (fenceRefuse: none). It defines
// fence_ok(), whether the marker still holds that epoch (true without a
// marker key, false with fenceRefuse), and
// take_tokens(tk, n), which takes n tokens from the counter tk and returns
// the last, raising the counter to the floor first if it is below: so
// after an epoch bump every new token exceeds every token of the earlier
// epochs, even if the counter was lost. Floors stay below 2^53, so Lua's
// numbers (doubles) hold them exactly.
const fenceLua = `
local floor, fence_key, fence_epoch = tonumber(ARGV[4]) or 0, ARGV[5] or '', ARGV[6] or ''
local fence_checked = nil
local function fence_ok()
  if fence_epoch == '-' then return false end
  if fence_key == '' then return true end
  if fence_checked == nil then
    fence_checked = redis.call('HMGET', fence_key, 'epoch')[1] == fence_epoch
  end
  return fence_checked
end
local function take_tokens(tk, n)
  local tok = redis.call('INCRBY', tk, n)
  if tok - n < floor then
    tok = redis.call('INCRBY', tk, string.format('%d', floor - (tok - n)))
  end
  return tok
end
`

// fenceRefuse is the epoch argument of fenceLua that makes fence_ok()
// fail: a store whose epoch is not proven.
const fenceRefuse = "-"

// fenceRefusal is the error a claim script answers, before it writes
// anything, when fence_ok() fails: the store lost (or moved past) the
// epoch the caller proved.
const fenceRefusal = `'KJOBUNPROVEN the epoch marker does not hold epoch ' .. fence_epoch`

// claimBatchScript claims windows of one job. KEYS[1] is the job's token
// counter, KEYS[2..] the window hashes in order; ARGV owner, claim TTL ms,
// hold ms (Retention + ClaimTTL), then the store epoch's floor, marker key
// and epoch (fenceLua). A store whose marker does not hold the epoch
// claims nothing and answers an error (fenceRefusal).
//
// Each window is decided in order: done or dead gives AlreadyDone, a live
// claim Busy, anything else (no record, failed, an expired claim) is
// claimed. The fencing tokens of the claimed windows come from one INCRBY
// of the counter by their number, handed out in order, so they are unique
// and strictly increasing per job exactly as one INCR per window would make
// them. A window repeated in KEYS is Busy (held by owner) after its first
// claim, or reported like its first occurrence otherwise.
//
// Reply: {first token or 0, r1, ..., rn} where ri is the attempt number
// (an integer) of a claimed window, whose token is the next one from
// first token on, or "outcome|token|attempts|claim ms left|holder" for any
// other.
var claimBatchScript = newBatchScript(luaNow + fenceLua + claimGroupLua + `
if not fence_ok() then return redis.error_reply(` + fenceRefusal + `) end
return claim_group(KEYS[1], 2, #KEYS)
`)

// claimJobsScript claims windows of several jobs in one call, for a server
// that is not a Redis Cluster node (see Store.crossJob): KEYS are, for
// each job in turn, its token counter then its window hashes; ARGV owner,
// claim TTL ms, hold ms, the store epoch's three (fenceLua), then the
// number of windows of each job. Each job's
// windows are decided exactly as by claimBatchScript, and the reply is the
// concatenation of the replies claimBatchScript would give for each job.
var claimJobsScript = newBatchScript(luaNow + fenceLua + claimGroupLua + `
if not fence_ok() then return redis.error_reply(` + fenceRefusal + `) end
local reply, k = {}, 1
for g = 7, #ARGV do
  local n = tonumber(ARGV[g])
  local out = claim_group(KEYS[k], k + 1, k + n)
  for j = 1, n + 1 do reply[#reply + 1] = out[j] end
  k = k + n + 1
end
return reply
`)

// claimOneLua defines claim_one(kw, tk, owner, until_s, hold_ms): it
// decides one window, whose hash is kw and whose job's token counter is tk,
// as claim_group decides each window, and returns two values: the new
// token and the attempt number of a claimed window, or 0 and
// "outcome|token|attempts|claim ms left|holder" for any other (see
// claimBatchScript).
const claimOneLua = `
local function claim_one(kw, tk, owner, until_s, hold_ms)
  local w = redis.call('HMGET', kw, 'status', 'token', 'attempts', 'holder', 'claim_until_ms')
  local st, attempts = w[1], tonumber(w[3]) or 0
  if st == 'done' or st == 'dead' or st == 'skipped' or st == 'superseded' then
    return 0, '1|' .. (w[2] or '0') .. '|' .. attempts .. '|0|' .. (w[4] or '')
  end
  local left = 0
  if st == 'running' then left = (tonumber(w[5]) or 0) - now end
  if left > 0 then
    return 0, '2|' .. (w[2] or '0') .. '|' .. attempts .. '|' .. string.format('%d', left) .. '|' .. (w[4] or '')
  end
  -- INCRBY, not INCR: it is the command the worker's ACL grants
  -- (deploy/SECURITY.md; TestRedisACLsCoverScripts).
  local tok = take_tokens(tk, 1)
  redis.call('HSET', kw, 'status', 'running', 'token', string.format('%d', tok), 'attempts', string.format('%d', attempts + 1),
    'holder', owner, 'updated_ms', now_s, 'claim_until_ms', until_s)
  redis.call('PEXPIRE', kw, hold_ms)
  return tok, attempts + 1
end
`

// claimGroupLua defines claim_group(tk, from, to), the body of the claim
// scripts: it decides the windows KEYS[from..to] of one job, whose token
// counter is tk, and returns {first token or 0, r_from, ..., r_to} (see
// claimBatchScript).
const claimGroupLua = claimOneLua + `
local owner, claim_ms, hold_ms = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local until_s = string.format('%d', now + claim_ms)
local function claim_group(tk, from, to)
  if from == to then
    -- One window (the common case of a worker claiming each job's next
    -- window as it comes up): the same decision, without the tables.
    local tok, r = claim_one(KEYS[from], tk, owner, until_s, hold_ms)
    return {tok, r}
  end
  local out, todo, first, dups = {0}, {}, {}, {}
  for i = from, to do
    local o = i - from + 2
    local kw = KEYS[i]
    local f = first[kw]
    if f then
      dups[#dups + 1] = o
    else
      first[kw] = o
      local w = redis.call('HMGET', kw, 'status', 'token', 'attempts', 'holder', 'claim_until_ms')
      local st, attempts = w[1], tonumber(w[3]) or 0
      local left = 0
      if st == 'running' then left = (tonumber(w[5]) or 0) - now end
      if st == 'done' or st == 'dead' or st == 'skipped' or st == 'superseded' then
        out[o] = '1|' .. (w[2] or '0') .. '|' .. attempts .. '|0|' .. (w[4] or '')
      elseif left > 0 then
        out[o] = '2|' .. (w[2] or '0') .. '|' .. attempts .. '|' .. string.format('%d', left) .. '|' .. (w[4] or '')
      else
        todo[#todo + 1] = o
        out[o] = attempts + 1
      end
    end
  end
  local tokens = {}
  if #todo > 0 then
    local tok = take_tokens(tk, #todo) - #todo
    out[1] = tok + 1
    for _, o in ipairs(todo) do
      tok = tok + 1
      local ts = string.format('%d', tok)
      tokens[o] = ts
      redis.call('HSET', KEYS[from + o - 2], 'status', 'running', 'token', ts, 'attempts', string.format('%d', out[o]),
        'holder', owner, 'updated_ms', now_s, 'claim_until_ms', until_s)
      redis.call('PEXPIRE', KEYS[from + o - 2], hold_ms)
    end
  end
  for _, o in ipairs(dups) do
    local f = first[KEYS[from + o - 2]]
    if tokens[f] then
      out[o] = '2|' .. tokens[f] .. '|' .. out[f] .. '|' .. ARGV[2] .. '|' .. owner
    else
      out[o] = out[f]
    end
  end
  return out
end
`

// settleScript applies one compare-and-set transition to each window of
// a batch: every state change after a claim (extend, complete, release,
// dead letter, unclaim) and the settlements without a run that overlap
// policies make (skip, supersede). KEYS are the window hashes; ARGV claim
// TTL ms, hold ms, retention ms, the store epoch's three (fenceLua; they
// bear on chained claims only), then per window its op and token as one
// string ("c42": op 'c', token 42; token 0 for none), followed by a reason
// for the ops that take one (r, d, s, p). The reply is one string with the
// result digit of each window, in order: resOK, resDone (the window is
// settled already: done, dead, skipped or superseded), resFenced (the
// token is not the window's current claim) or resBusy (a token-less skip or
// supersede found a live claim).
//
// A complete may chain a claim ("C42", Settlement.Next): its window's key
// in KEYS is followed by the next window's hash and its job's token
// counter, and its spec in ARGV by the owner. When the completion
// succeeds, the next window is claimed for the owner in the same script,
// exactly as claim_one decides it; otherwise (or when fence_ok() fails: the
// store lost the caller's epoch) it is left alone. The reply
// is then a table: the string of result digits, followed by two values per
// chained complete in order: claim_one's two results (the token and
// attempt of a claimed window, or 0 and "outcome|token|attempts|claim ms
// left|holder"), or 0 and 0 when the completion failed.
//
// The ops:
//
//	e extend:    running with token: the claim lives another claim TTL
//	             (re-created if it had expired: nobody re-claimed)
//	c complete:  running with token: done (the record keeps the claim's
//	             TTL, above Retention, or gets Retention if it expired)
//	r release:   running with token: failed, reason kept; releasing twice
//	             with the same token is a no-op
//	d dead:      running or failed with token: dead (settled for good)
//	u unclaim:   running with token, attempt never started: the attempt
//	             count goes back down; a window with none left is deleted
//	s skip:      skipped (overlap policy: not run), reason kept
//	p supersede: superseded (overlap policy replace), reason kept
//
// Skip and supersede with a token need that token's claim (running or
// released); without one (token 0), they need no live claim: a window
// whose claim expired, or that was released or never claimed, is settled,
// while a live claim (someone runs it) answers resBusy.
var settleScript = newBatchScript(luaNow + fenceLua + claimOneLua + `
local claim_ms, hold_ms, retain_ms = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local out, nexts, until_s, a, k, i = {}, nil, nil, 7, 1, 0
while k <= #KEYS do
  i = i + 1
  local kw = KEYS[k]
  k = k + 1
  local spec = ARGV[a]
  a = a + 1
  local op, token = string.sub(spec, 1, 1), string.sub(spec, 2)
  local chain = op == 'C'
  if chain then op = 'c' end
  local reason = ''
  if op == 'r' or op == 'd' or op == 's' or op == 'p' then
    reason = ARGV[a]
    a = a + 1
  end
  local w = redis.call('HMGET', kw, 'status', 'token', 'attempts', 'claim_until_ms')
  local st, mine = w[1], w[2] == token
  local r = '0'
  if st == 'done' or st == 'dead' or st == 'skipped' or st == 'superseded' then
    r = '1'
  elseif op == 'e' then
    if st ~= 'running' or not mine then r = '2' else
      redis.call('HSET', kw, 'claim_until_ms', string.format('%d', now + claim_ms))
      redis.call('PEXPIRE', kw, hold_ms)
    end
  elseif op == 'c' then
    if st ~= 'running' or not mine then r = '2' else
      redis.call('HSET', kw, 'status', 'done', 'updated_ms', now_s, 'claim_until_ms', '0')
      if (tonumber(w[4]) or 0) <= now then redis.call('PEXPIRE', kw, retain_ms) end
    end
  elseif op == 'r' then
    if not mine or (st ~= 'running' and st ~= 'failed') then r = '2'
    elseif st == 'running' then
      redis.call('HSET', kw, 'status', 'failed', 'last_error', reason, 'updated_ms', now_s, 'claim_until_ms', '0')
      redis.call('PEXPIRE', kw, retain_ms)
    end
  elseif op == 'd' then
    if not mine or (st ~= 'running' and st ~= 'failed') then r = '2' else
      redis.call('HSET', kw, 'status', 'dead', 'last_error', reason, 'updated_ms', now_s, 'claim_until_ms', '0')
      redis.call('PEXPIRE', kw, retain_ms)
    end
  elseif op == 'u' then
    if st ~= 'running' or not mine then r = '2' else
      local attempts = (tonumber(w[3]) or 0) - 1
      if attempts <= 0 then
        redis.call('DEL', kw)
      else
        redis.call('HSET', kw, 'status', 'failed', 'attempts', string.format('%d', attempts), 'claim_until_ms', '0')
        redis.call('PEXPIRE', kw, retain_ms)
      end
    end
  elseif op == 's' or op == 'p' then
    if token ~= '0' then
      if not mine or (st ~= 'running' and st ~= 'failed') then r = '2' end
    elseif st == 'running' and (tonumber(w[4]) or 0) > now then
      r = '3'
    end
    if r == '0' then
      local status = 'skipped'
      if op == 'p' then status = 'superseded' end
      redis.call('HSET', kw, 'status', status, 'last_error', reason, 'updated_ms', now_s, 'claim_until_ms', '0')
      redis.call('PEXPIRE', kw, retain_ms)
    end
  else
    return redis.error_reply('kjob settle: unknown op ' .. op)
  end
  out[i] = r
  if chain then
    local kn, tk, owner = KEYS[k], KEYS[k + 1], ARGV[a]
    k = k + 2
    a = a + 1
    nexts = nexts or {''}
    if r == '0' and fence_ok() then
      until_s = until_s or string.format('%d', now + claim_ms)
      local tok, c = claim_one(kn, tk, owner, until_s, hold_ms)
      nexts[#nexts + 1] = tok
      nexts[#nexts + 1] = c
    else
      nexts[#nexts + 1] = 0
      nexts[#nexts + 1] = 0
    end
  end
end
if nexts then
  nexts[1] = table.concat(out)
  return nexts
end
return table.concat(out)
`)

// stateScript returns nil when there is no record, otherwise
// {status, token, attempts, holder, updated_ms, last_error, claim ms left}.
var stateScript = redis.NewScript(luaNow + `
local w = redis.call('HMGET', KEYS[1], 'status', 'token', 'attempts', 'holder', 'updated_ms', 'last_error', 'claim_until_ms')
if not w[1] then return false end
local left = 0
if w[1] == 'running' then left = (tonumber(w[7]) or 0) - now end
if left < 0 then left = 0 end
return {w[1], w[2] or '0', tonumber(w[3]) or 0, w[4] or '', tonumber(w[5]) or 0, w[6] or '', left}
`)

const (
	resOK     = '0'
	resDone   = '1'
	resFenced = '2'
	resBusy   = '3'
)

// batchScript is a script the batch calls send in pipelines (Store.pipelineCmds),
// with its source for the EVAL that follows a NOSCRIPT.
type batchScript struct {
	*redis.Script
	src string
}

func newBatchScript(src string) *batchScript {
	return &batchScript{Script: redis.NewScript(src), src: src}
}

// cmd queues a call of the script on pipe, by hash (EVALSHA) or by source
// (EVAL), with keys and args. The keys go in by pointer, as settleArgs'
// strings do: a pointer in an interface costs no allocation where a
// string costs one, and a batch has up to three keys per window (the
// no-op burst row, test/perf BenchmarkBurst). go-redis writes a *string
// as the string and routes the call by its first key (position 3), as it
// does Script.EvalSha's.
func (b *batchScript) cmd(ctx context.Context, pipe redis.Pipeliner, bySHA bool, keys []string, args []any) *redis.Cmd {
	a := make([]any, 3+len(keys)+len(args))
	a[0], a[1] = "evalsha", b.Hash()
	if !bySHA {
		a[0], a[1] = "eval", b.src
	}
	a[2] = len(keys)
	for i := range keys {
		a[3+i] = &keys[i]
	}
	copy(a[3+len(keys):], args)
	cmd := redis.NewCmd(ctx, a...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	_ = pipe.Process(ctx, cmd)
	return cmd
}
