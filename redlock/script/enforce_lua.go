package script

// enforceSource is the enforcing layer of __rp_mk (enforce.go), joined
// into one line by oneLine: no comments, no string spans two lines.
// Placeholders: @CMDS@ the command table (commandTable), @RES@ the
// reserved prefix, @MAXV@ max_value_bytes, @MAXS@ the most a string
// function may build, @WKEYS@ and @WBYTES@ the write budget, @COST@ the
// pattern bound. Every function it uses is a local taken before the body
// runs; it reads client tables only with rawget and type, and calls no
// tostring but on numbers.
const enforceSource = `
local type, tonumber, select, rawget, next, ipairs, setmt, getmt = type, tonumber, select, rawget, next, ipairs, setmetatable, getmetatable
local upper, lower, sfind, ssub, sbyte, sformat, srep, sgsub = string.upper, string.lower, string.find, string.sub, string.byte, string.format, string.rep, string.gsub
local smatch, sgmatch, tsort, tconcat, floor, mlog, err0, unpack0 = string.match, string.gmatch, table.sort, table.concat, math.floor, math.log, error, unpack
local sgfind, gcol = string.gfind, collectgarbage
local __rp_lib = {rep = srep, find = sfind, match = smatch, gmatch = sgmatch, gsub = sgsub, format = sformat, concat = tconcat, sort = tsort, unpack = unpack0}
local __rp_C, __rp_res = @CMDS@, @RES@
local __rp_decl, __rp_isdecl = {}, {}
for i = 1, #KEYS do __rp_decl[i] = KEYS[i] __rp_isdecl[KEYS[i]] = true end
local function __rp_no(m) err0({err = 'ERR ' .. m .. ' (redlock-proxy checks scripts by vote as they run: see docs/safety.md)'}) end
local function __rp_show(s) if #s > 64 then s = ssub(s, 1, 64) .. '...' end return (sgsub(s, '[%c]', '?')) end
local function __rp_has(f, b) return floor(f / b) % 2 == 1 end
local function __rp_one(p, pi, c)
	local pc, n = sbyte(p, pi), #p
	if pc == 63 then return pi + 1, true end
	if pc == 92 then if pi < n then return pi + 2, sbyte(p, pi + 1) == c end return pi + 1, c == 92 end
	if pc ~= 91 then return pi + 1, pc == c end
	local q = pi + 1
	local neg = sbyte(p, q) == 94
	if neg then q = q + 1 end
	local m = false
	while q <= n and sbyte(p, q) ~= 93 do
		local x = sbyte(p, q)
		if x == 92 and q < n then q = q + 1 m = m or sbyte(p, q) == c
		elseif q + 2 <= n and sbyte(p, q + 1) == 45 and sbyte(p, q + 2) ~= 93 then
			local lo, hi = x, sbyte(p, q + 2)
			if lo > hi then lo, hi = hi, lo end
			m = m or (lo <= c and c <= hi) q = q + 2
		else m = m or x == c end
		q = q + 1
	end
	if q <= n then q = q + 1 end
	return q, m ~= neg
end
local function __rp_glob(p, s)
	local pi, si, np, ns, star, mark = 1, 1, #p, #s, 0, 0
	while si <= ns do
		local adv = false
		if pi <= np then
			if sbyte(p, pi) == 42 then star, mark, pi, adv = pi, si, pi + 1, true
			else local nx, ok = __rp_one(p, pi, sbyte(s, si)) if ok then pi, si, adv = nx, si + 1, true end end
		end
		if not adv then
			if star == 0 then return false end
			mark = mark + 1 pi, si = star + 1, mark
		end
	end
	while pi <= np and sbyte(p, pi) == 42 do pi = pi + 1 end
	return pi > np
end
local function __rp_built(k)
	if __rp_isdecl[k] then return true end
	if not __rp_builds then return false end
	for _, b in ipairs(__rp_builds) do for i = 1, #__rp_decl do
		local d = b .. __rp_decl[i]
		if d ~= '' and ssub(k, 1, #d) == d then return true end
	end end
	return false
end
local function __rp_key(k)
	if type(k) == 'number' then
		if k ~= floor(k) or k > 1e15 or k < -1e15 then __rp_no('script named a key with a number that is not a whole one') end
		k = sformat('%.17g', k)
	end
	if type(k) ~= 'string' then return nil end
	if ssub(k, 1, #__rp_res) == __rp_res then __rp_no("script tried to access key '" .. __rp_show(k) .. "', reserved by redlock-proxy") end
	if not __rp_built(k) then __rp_no("script tried to access key '" .. __rp_show(k) .. "' outside its keys") end
	for i = 1, #__rp_pats do if __rp_glob(__rp_pats[i], k) then return k end end
	__rp_no("script tried to access key '" .. __rp_show(k) .. "' outside the user's key patterns")
end
local function __rp_grow(name, to) if to > @MAXV@ then __rp_no('script would grow a value with ' .. name .. ' to ' .. sformat('%.0f', to) .. ' bytes, past max_value_bytes (@MAXV@)') end end
local function __rp_len(x) if type(x) == 'string' then return #x elseif type(x) == 'number' then return 24 end return nil end
local function __rp_bitfield(a, n)
	local p = 2
	while p <= n do
		local u = type(a[p]) == 'string' and upper(a[p]) or ''
		if u == 'GET' or u == 'SET' or u == 'INCRBY' then
			local o, bits = a[p + 2], 64
			if type(o) == 'string' and ssub(o, 1, 1) == '#' then o, bits = tonumber(ssub(o, 2)), 128 else o = tonumber(o) end
			if o then __rp_grow('BITFIELD', floor(o * (bits / 64) / 8) + 16) end
			if u == 'GET' then p = p + 3 else p = p + 4 end
		elseif u == 'OVERFLOW' then p = p + 2 else p = p + 1 end
	end
end
local __rp_wk, __rp_nwk, __rp_wb, __rp_over, __rp_rd = {}, 0, 0, nil, {}
local function __rp_cond(name, a, n)
	if name == 'SETNX' or name == 'MSETNX' or name == 'HSETNX' then return true end
	if name ~= 'SET' then return false end
	for p = 3, n do if type(a[p]) == 'string' then
		local u = upper(a[p])
		if u == 'NX' or u == 'XX' or u == 'IFEQ' or u == 'IFNE' or u == 'IFDEQ' or u == 'IFDNE' then return true end
	end end
	return false
end
local function __rp_check(c, ...)
	if __rp_over then __rp_no(__rp_over) end
	if type(c) ~= 'string' then __rp_no('script called redis with a command name that is not a string') end
	local name = upper(c)
	if name == 'SELECT' and @SEL0@ and select('#', ...) == 1 and tonumber((...)) == 0 then return 0 end
	local i = not sfind(name, '[^%w_]') and sfind(__rp_C, '|' .. name .. ':', 1, true)
	if not i then __rp_no("script tried to run '" .. __rp_show(lower(c)) .. "', which scripts by vote may not") end
	local f, l, st, nk, fl = smatch(__rp_C, '^|[%w_]+:(%-?%d+):(%-?%d+):(%d+):(%d+):(%d+)', i)
	f, l, st, nk, fl = tonumber(f), tonumber(l), tonumber(st), tonumber(nk), tonumber(fl)
	local n, a, keys, at = select('#', ...), {...}, {}, {}
	if f > 0 then
		local last = l
		if last < 0 then last = n + 1 + l end
		for p = f, last, st do if p <= n then keys[#keys + 1], at[p] = __rp_key(a[p]), true end end
	end
	if nk > 0 then
		local cnt = tonumber(a[nk])
		if cnt and cnt > 0 then for p = nk + 1, nk + cnt do if p > n then break end keys[#keys + 1], at[p] = __rp_key(a[p]), true end end
	end
	if __rp_has(fl, 2) then for p = 2, n do if type(a[p]) == 'string' then
		local u = upper(a[p])
		if u == 'BY' or u == 'GET' then __rp_no('script used SORT with BY or GET, which read other keys') end
		if u == 'STORE' then keys[#keys + 1], at[p + 1] = __rp_key(a[p + 1]), true end
	end end end
	if __rp_has(fl, 4) then for p = 3, n do if type(a[p]) == 'string' and upper(a[p]) == 'DB' then __rp_no('script used COPY with DB, which reaches another database') end end end
	if __rp_has(fl, 32) and type(a[1]) == 'string' and ssub(a[1], 1, #__rp_res) == __rp_res then __rp_no('script tried to publish on a channel reserved by redlock-proxy') end
	for p = 1, n do if not at[p] and type(a[p]) == 'string' and #a[p] > @MAXV@ then __rp_no('script sent an argument of ' .. #a[p] .. ' bytes, past max_value_bytes (@MAXV@)') end end
	if name == 'SETRANGE' then local o = tonumber(a[2]) if o then __rp_grow(name, o + (__rp_len(a[3]) or 0)) end
	elseif name == 'SETBIT' then local o = tonumber(a[2]) if o then __rp_grow(name, floor(o / 8) + 1) end
	elseif name == 'APPEND' then
		local cur = __rp_r0.pcall('STRLEN', a[1])
		if type(cur) == 'number' then __rp_grow(name, cur + (__rp_len(a[2]) or 0)) end
	elseif name == 'BITFIELD' then __rp_bitfield(a, n) end
	if __rp_has(fl, 1) then
		local cond = __rp_cond(name, a, n)
		for _, k in ipairs(keys) do if cond or __rp_rd[k] then __rp_lk[k] = true end end
		for _, k in ipairs(keys) do if not __rp_wk[k] then __rp_wk[k] = true __rp_nwk = __rp_nwk + 1 end end
		for p = 1, n do __rp_wb = __rp_wb + (__rp_len(a[p]) or 0) end
		if __rp_nwk > @WKEYS@ then __rp_over = 'script wrote more than @WKEYS@ keys, the most one script by vote may write' end
		if __rp_wb > @WBYTES@ then __rp_over = 'script wrote more than @WBYTES@ bytes, the most one script by vote may write' end
		if __rp_over then __rp_no(__rp_over) end
	else for _, k in ipairs(keys) do __rp_rd[k] = true end end
	return fl
end
local function __rp_sort(fl, r)
	if type(r) ~= 'table' or rawget(r, 'map') ~= nil or rawget(r, 'set') ~= nil or rawget(r, 'err') ~= nil then return r end
	if __rp_has(fl, 8) then tsort(r)
	elseif __rp_has(fl, 16) then
		local fs, vs = {}, {}
		for i = 1, #r, 2 do fs[#fs + 1] = r[i] vs[r[i]] = r[i + 1] end
		tsort(fs)
		for i, x in ipairs(fs) do r[2 * i - 1], r[2 * i] = x, vs[x] end
	end
	return r
end
local __rp_in = __rp_base
__rp_base = setmt({call = function(c, ...) local fl = __rp_check(c, ...) return __rp_sort(fl, __rp_in.call(c, ...)) end,
	pcall = function(c, ...) local fl = __rp_check(c, ...) return __rp_sort(fl, __rp_in.pcall(c, ...)) end,
	setresp = function() __rp_no('script called redis.setresp: scripts by vote read RESP2 replies') end},
	{__index = __rp_r0, __metatable = false})
local function __rp_pat(s, p, anch)
	if type(p) == 'number' then p = sformat('%.14g', p) end
	local ls = __rp_len(s)
	if type(p) ~= 'string' or not ls then return end
	local q, o, sc, i, np, a, op, oq = 0, 0, 0, 1, #p, false, nil, 0
	local function settle(once)
		if op and not once then if oq == 63 then o = o + 1 else q = q + 1 end
		elseif op and oq ~= 63 then sc = 1 end
		op = nil
	end
	if anch and sbyte(p, 1) == 94 then a, i = true, 2 end
	while i <= np do
		local c, x, j = sbyte(p, i), sbyte(p, i + 1), i + 1
		if c == 37 then j = i + 2 end
		if c == 91 or c == 37 and x == 102 then
			if c == 37 then j = i + 3 end
			if sbyte(p, j) == 94 then j = j + 1 end
			if sbyte(p, j) == 93 then j = j + 1 end
			while j <= np and sbyte(p, j) ~= 93 do if sbyte(p, j) == 37 then j = j + 1 end j = j + 1 end
			j = j + 1
		end
		if c == 37 and (x == 98 or x == 102 or x and x >= 48 and x <= 57) then
			settle(false)
			if x == 98 then j = i + 4 end
			if x ~= 102 then sc = 1 end
		elseif c ~= 40 and c ~= 41 and (c ~= 36 or i < np) then
			local m, ch = sbyte(p, j), ssub(p, j - 1, j - 1)
			if op then settle((j == i + 1 and c ~= 46 or c == 37 and sfind('^$()%.[]*+-?', ch, 1, true)) and m ~= 42 and m ~= 45 and m ~= 63 and not sfind(ch, '^' .. op .. '()')) end
			if m == 42 or m == 43 or m == 45 or m == 63 then op, oq, j = ssub(p, i, j - 1), m, j + 1 end
		end
		i = j
	end
	settle(true)
	if not a then q = q + 1 end
	q = q + sc
	if q * mlog(ls + 1) + o * mlog(2) + mlog(np + 1) > mlog(@COST@) then
		__rp_no('script used a Lua pattern that may backtrack too long on a subject of ' .. ls .. ' bytes')
	end
end
local __rp_S, __rp_T, __rp_gci, __rp_m0 = {}, {}, rawget(_G, 'gcinfo'), nil
if type(__rp_gci) == 'function' then __rp_m0 = __rp_gci() end
if type(__rp_m0) ~= 'number' then __rp_m0 = nil end
local function __rp_heap()
	if __rp_m0 and __rp_gci() - __rp_m0 > @HEAPKB@ then
		gcol('collect')
		if __rp_gci() - __rp_m0 > @HEAPKB@ then __rp_no('script holds more than @HEAPKB@ KiB of strings and tables, the most a script by vote may') end
	end
end
__rp_S.rep = function(...)
	local s, n = ...
	local ls, k = __rp_len(s), tonumber(n)
	if ls and k and ls * k > @MAXS@ then __rp_no('script asked string.rep for more than @MAXS@ bytes') end
	__rp_heap()
	return __rp_lib.rep(...)
end
__rp_S.find = function(...) local s, p, _, plain = ... if not plain then __rp_pat(s, p, true) end return __rp_lib.find(...) end
__rp_S.match = function(...) local s, p = ... __rp_pat(s, p, true) return __rp_lib.match(...) end
__rp_S.gmatch = function(...) local s, p = ... __rp_pat(s, p, false) return __rp_lib.gmatch(...) end
__rp_S.gsub = function(s, p, r, n)
	__rp_pat(s, p, true)
	local ls = __rp_len(s) or 0
	if type(r) == 'string' and (ls + 1) * (#r + 1) > @MAXS@ then __rp_no('script asked string.gsub for a result that may pass @MAXS@ bytes') end
	if type(r) == 'table' then
		if getmt(r) ~= nil then __rp_no('script gave string.gsub a table with a metatable') end
		local t = r
		r = function(c) return rawget(t, c) end
	end
	if type(r) == 'function' then
		local f, tot = r, ls
		r = function(...)
			local v = f(...)
			tot = tot + (__rp_len(v) or 0)
			if tot > @MAXS@ then __rp_no('script built a string.gsub result past @MAXS@ bytes') end
			return v
		end
	end
	__rp_heap()
	return __rp_lib.gsub(s, p, r, n)
end
__rp_S.gfind = __rp_S.gmatch
__rp_S.format = function(...)
	local f = ...
	local a, n, tot = {select(2, ...)}, select('#', ...) - 1, __rp_len(f) or 0
	local mul = 1
	if type(f) == 'string' and sfind(f, 'q', 1, true) then mul = 4 end
	for i = 1, n do
		local x = a[i]
		if type(x) == 'string' then tot = tot + mul * #x + 101
		elseif type(x) == 'number' and x < 1e15 and x > -1e15 then tot = tot + 128
		else tot = tot + 512 end
	end
	if tot > @MAXS@ then __rp_no('script asked string.format for a result that may pass @MAXS@ bytes') end
	__rp_heap()
	return __rp_lib.format(...)
end
__rp_T.concat = function(t, sep, i, j)
	if type(t) == 'table' then
		local tot, ls, k, b = 0, __rp_len(sep) or 0, tonumber(i) or 1, tonumber(j) or #t
		while k <= b do
			local x = __rp_len(rawget(t, k))
			if not x then break end
			tot = tot + x + ls
			if tot > @MAXS@ then __rp_no('script asked table.concat for more than @MAXS@ bytes') end
			k = k + 1
		end
	end
	__rp_heap()
	return __rp_lib.concat(t, sep, i, j)
end
__rp_T.sort = function(t, f)
	if f == nil and type(t) == 'table' and #t > @SORTN@ then __rp_no('script asked table.sort for more than @SORTN@ values without a comparison function') end
	if f == nil then return __rp_lib.sort(t) end
	return __rp_lib.sort(t, f)
end
local function __rp_unpack(t, i, j)
	local a, b = tonumber(i) or 1, tonumber(j)
	if not b and type(t) == 'table' then b = #t end
	if b and b - a >= 8000 then __rp_no('script asked unpack for more than 8000 values') end
	return __rp_lib.unpack(t, i, j)
end
local function __rp_encodes(...)
	local st, n, tot = {...}, select('#', ...), 0
	while n > 0 do
		local v = st[n]
		st[n], n = nil, n - 1
		if type(v) == 'string' then tot = tot + 6 * #v + 3
		elseif type(v) == 'table' then
			tot = tot + 2
			for k, x in next, v do
				st[n + 1], st[n + 2], n, tot = k, x, n + 2, tot + 2
				if tot > @MAXS@ then return false end
			end
		else tot = tot + 32 end
		if tot > @MAXS@ then return false end
	end
	return true
end
local __rp_CJ, __rp_MP, __rp_cj0, __rp_mp0 = nil, nil, rawget(_G, 'cjson'), rawget(_G, 'cmsgpack')
if type(__rp_cj0) == 'table' then
	local enc, dec = __rp_cj0.encode, __rp_cj0.decode
	__rp_CJ = {encode = function(v)
		if not __rp_encodes(v) then __rp_no('script asked cjson.encode for more than @MAXS@ bytes') end
		__rp_heap()
		return enc(v)
	end, decode = dec}
	for _, k in ipairs({'decode_invalid_numbers', 'decode_max_depth', 'encode_invalid_numbers', 'encode_keep_buffer', 'encode_max_depth', 'encode_number_precision', 'encode_sparse_array'}) do
		local f = __rp_cj0[k]
		if f then __rp_CJ[k] = function(...)
			if select('#', ...) > 0 then __rp_no("script tried to change cjson's settings, which every later script shares") end
			return f()
		end end
	end
	__rp_CJ.new = function() return __rp_CJ end
	setmt(__rp_CJ, {__index = __rp_cj0, __metatable = false})
end
if type(__rp_mp0) == 'table' then
	local pack = __rp_mp0.pack
	__rp_MP = setmt({pack = function(...)
		if not __rp_encodes(...) then __rp_no('script asked cmsgpack.pack for more than @MAXS@ bytes') end
		__rp_heap()
		return pack(...)
	end}, {__index = __rp_mp0, __metatable = false})
end
local function __rp_cat2(a, b)
	local la, lb = __rp_len(a), __rp_len(b)
	if la and lb then
		if la + lb > @MAXS@ then __rp_no('script built a string of more than @MAXS@ bytes with ..') end
		__rp_heap()
	else
		local ta, tb = type(a), type(b)
		if ta ~= 'table' and ta ~= 'userdata' and tb ~= 'table' and tb ~= 'userdata' then
			if la then ta = tb end
			err0('attempt to concatenate a ' .. ta .. ' value', 3)
		end
	end
	return a .. b
end
local function __rp_cat(a, b, ...)
	local n = select('#', ...)
	if n == 0 then
		local r = __rp_cat2(a, b)
		return r
	end
	local t, tot = {a, b, ...}, 0
	n = n + 2
	for i = 1, n do
		local l = __rp_len(t[i])
		if not l then tot = nil break end
		tot = tot + l
	end
	if tot then
		if tot > @MAXS@ then __rp_no('script built a string of more than @MAXS@ bytes with ..') end
		__rp_heap()
		return tconcat(t, '', 1, n)
	end
	local r = t[n]
	for i = n - 1, 1, -1 do r = __rp_cat2(t[i], r) end
	return r
end
local function __rp_getmt(o) if type(o) == 'string' then return {__index = __rp_S} end return getmt(o) end
local function __rp_gc(o, ...)
	if o == nil or o == 'collect' or o == 'count' or o == 'step' then return gcol(o, ...) end
	__rp_no('script called collectgarbage with an option other than collect, count or step')
end
local __rp_real = {}
do
	local real = {srep, __rp_S.rep, sformat, __rp_S.format, sgsub, __rp_S.gsub, sfind, __rp_S.find, smatch, __rp_S.match, sgmatch, __rp_S.gmatch,
		sgfind or false, __rp_S.gfind, tconcat, __rp_T.concat, tsort, __rp_T.sort, unpack0, __rp_unpack, getmt, __rp_getmt, gcol, __rp_gc}
	if __rp_CJ then real[#real + 1], real[#real + 2], real[#real + 3], real[#real + 4] = __rp_cj0.encode or false, __rp_CJ.encode, __rp_cj0.new or false, __rp_CJ.new end
	if __rp_MP then real[#real + 1], real[#real + 2] = __rp_mp0.pack or false, __rp_MP.pack end
	for i = 1, #real, 2 do if real[i] then __rp_real[real[i]] = real[i + 1] end end
end
local function __rp_ix(o, k)
	local t = type(o)
	if t == 'string' then return __rp_S[k] end
	if t ~= 'table' and t ~= 'userdata' then err0('attempt to index a ' .. t .. ' value', 2) end
	local v = o[k]
	if type(v) == 'function' and __rp_real[v] then return __rp_real[v] end
	return v
end
local function __rp_mc(o, k, ...)
	local t, f = type(o), nil
	if t == 'string' then f = __rp_S[k]
	elseif t == 'table' or t == 'userdata' then
		f = o[k]
		if type(f) == 'function' and __rp_real[f] then f = __rp_real[f] end
	else err0('attempt to index a ' .. t .. ' value', 2) end
	local tf = type(f)
	if tf ~= 'function' and tf ~= 'table' and tf ~= 'userdata' then err0("attempt to call method '" .. k .. "' (a " .. tf .. ' value)', 2) end
	return f(o, ...)
end
local function __rp_noload() __rp_no('script called loadstring or load, which scripts by vote may not') end
local function __rp_nofenv() __rp_no('script called getfenv or setfenv, which scripts by vote may not') end
local function __rp_ro() err0('Attempt to modify a readonly table', 2) end
setmt(__rp_S, {__index = string, __newindex = __rp_ro, __metatable = false})
setmt(__rp_T, {__index = table, __newindex = __rp_ro, __metatable = false})
local __rp_K, __rp_A, __rp_G = {}, {}, {}
for i = 1, #KEYS do __rp_K[i] = KEYS[i] end
for i = 1, #ARGV do __rp_A[i] = ARGV[i] end
__rp_G.redis, __rp_G.KEYS, __rp_G.ARGV, __rp_G.string, __rp_G.table = __rp_base, __rp_K, __rp_A, __rp_S, __rp_T
__rp_G.unpack, __rp_G._G, __rp_G.loadstring, __rp_G.load = __rp_unpack, __rp_G, __rp_noload, __rp_noload
__rp_G.getfenv, __rp_G.setfenv, __rp_G.getmetatable, __rp_G.collectgarbage = __rp_nofenv, __rp_nofenv, __rp_getmt, __rp_gc
__rp_G.cjson, __rp_G.cmsgpack = __rp_CJ, __rp_MP
local __rp_g0 = _G
setmt(__rp_G, {__index = function(_, k) return rawget(__rp_g0, k) end, __metatable = false})
local __rp_env = {__rp_K, __rp_A, __rp_S, __rp_T, __rp_unpack, __rp_G, __rp_noload, __rp_noload, __rp_nofenv, __rp_nofenv,
	__rp_getmt, __rp_gc, __rp_CJ, __rp_MP, __rp_ix, __rp_mc, __rp_cat}
`

// enforceParams are the body's parameters after redis when it runs
// enforced, in __rp_env's order: each shadows the global of its name.
const enforceParams = "KEYS, ARGV, string, table, unpack, _G, loadstring, load, getfenv, setfenv, getmetatable, collectgarbage, cjson, cmsgpack, __rp_ix, __rp_mc, __rp_cat, "

// enforcePrep takes the user's patterns off ARGV (EnforceArgs), after
// the holds' (heldPrep), into __rp_pats; a script sent without them is
// refused.
const enforcePrep = "local __rp_pats = {} " +
	"do local n = tonumber(ARGV[#ARGV]) if not n or n < 0 or n >= #ARGV then return {err = 'ERR redlock-proxy sent a script by vote without its key patterns'} end " +
	"for i = 1, n do __rp_pats[i] = ARGV[#ARGV - n - 1 + i] end for i = 1, n + 1 do ARGV[#ARGV] = nil end end "
