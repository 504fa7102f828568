-- Wireshark dissector for MRC (Multipath Reliable Connection) over RoCEv2, OCP-MRC-1.0.
-- Layouts mirror mrcemu/wire/codec.py. RoCE opcodes (< 0xC0) are handed to the
-- dissector that owned UDP port 4791 before us (Wireshark's InfiniBand).
-- Install: mrcemu wireshark install   or: wireshark -X lua_script:mrc.lua
local mrc = Proto("mrc", "Multipath Reliable Connection")

local OPCODES = {
  [0x06] = "RC_WRITE_FIRST", [0x07] = "RC_WRITE_MIDDLE", [0x08] = "RC_WRITE_LAST",
  [0x09] = "RC_WRITE_LAST_IMM", [0x0A] = "RC_WRITE_ONLY", [0x11] = "RC_ACK",
  [0xC6] = "WRITE_FIRST", [0xC7] = "WRITE_MIDDLE", [0xC8] = "WRITE_LAST",
  [0xC9] = "WRITE_LAST_IMM", [0xCA] = "WRITE_ONLY", [0xCB] = "WRITE_ONLY_IMM",
  [0xD1] = "ACKNOWLEDGE", [0xD8] = "ENDPOINT_REQUEST", [0xD9] = "ENDPOINT_RESPONSE",
  [0xDC] = "RELIABILITY_SACK", [0xDD] = "RELIABILITY_NACK", [0xDE] = "RELIABILITY_PROBE_REQ",
}
local NACK_REASONS = {
  [0x01] = "TRIMMED", [0x02] = "TRIMMED_LASTHOP", [0x06] = "NO_BITMAP", [0x07] = "NO_PKT_BUFFER",
  [0x0A] = "NO_RESOURCE", [0x0B] = "PSN_OOR_WINDOW", [0x19] = "UNEXP_EVENT",
}
local SACK_M = { [0] = "NONE", [1] = "SKIP_ONCE", [2] = "ALWAYS_SKIP" }
local EP_TYPES = { [1] = "EV_PROBE", [2] = "PORT_STATUS_UPDATE" }

local f = {
  opcode = ProtoField.uint8("mrc.opcode", "Opcode", base.HEX, OPCODES),
  se = ProtoField.uint8("mrc.se", "Solicited event", base.DEC, nil, 0x80),
  pkey = ProtoField.uint16("mrc.pkey", "P_Key", base.HEX),
  dqpn = ProtoField.uint24("mrc.dqpn", "Destination QP", base.DEC),
  ackreq = ProtoField.uint8("mrc.ackreq", "AckReq", base.DEC, nil, 0x80),
  r = ProtoField.uint8("mrc.r", "r", base.DEC, nil, 0x40),
  rtx = ProtoField.uint8("mrc.rtx", "Retransmission", base.DEC, nil, 0x20),
  ts = ProtoField.uint8("mrc.ts", "TSETH present", base.DEC, nil, 0x10),
  psn = ProtoField.uint24("mrc.psn", "PSN", base.DEC),
  ev = ProtoField.uint32("mrc.ev", "Entropy value (UDP sport << 16 | flow label)", base.HEX),
  trimmed = ProtoField.bool("mrc.trimmed", "Trimmed"),
  rqmsn = ProtoField.uint16("mrc.rqmsn", "RQMSN", base.DEC),
  msn = ProtoField.uint16("mrc.msn", "MSN", base.DEC),
  timestamp = ProtoField.uint32("mrc.timestamp", "TSETH timestamp", base.HEX),
  va = ProtoField.uint64("mrc.va", "Virtual address", base.HEX),
  rkey = ProtoField.uint32("mrc.rkey", "R_Key", base.HEX),
  dmalen = ProtoField.uint32("mrc.dmalen", "DMA length", base.DEC),
  imm = ProtoField.uint32("mrc.imm", "Immediate data", base.HEX),
  payload_len = ProtoField.uint32("mrc.payload_len", "Payload length", base.DEC),
  icrc = ProtoField.uint32("mrc.icrc", "ICRC", base.HEX),
  aeth_syndrome = ProtoField.uint8("mrc.aeth.syndrome", "Syndrome", base.HEX),
  aeth_msn = ProtoField.uint24("mrc.aeth.msn", "MSN", base.DEC),
  sack_type = ProtoField.uint16("mrc.sack.type", "Type", base.DEC, nil, 0xF000),
  sack_nxt = ProtoField.uint16("mrc.sack.nxt", "Next", base.DEC, nil, 0x0F80),
  sack_m = ProtoField.uint16("mrc.sack.m", "m", base.DEC, SACK_M, 0x0060),
  sack_pr = ProtoField.uint16("mrc.sack.pr", "pr", base.DEC, nil, 0x0010),
  sack_ack_psn_offset = ProtoField.int16("mrc.sack.ack_psn_offset", "ACK PSN offset", base.DEC),
  sack_entropy = ProtoField.uint32("mrc.sack.entropy", "Reflected EV", base.HEX),
  sack_spdcid = ProtoField.uint16("mrc.sack.spdcid", "Source PDC", base.DEC),
  sack_dpdcid = ProtoField.uint16("mrc.sack.dpdcid", "Destination PDC", base.DEC),
  sack_cack_psn = ProtoField.uint24("mrc.sack.cack_psn", "Cumulative ACK PSN", base.DEC),
  sack_cc_type = ProtoField.uint8("mrc.sack.cc_type", "CC type", base.DEC, nil, 0xF0),
  sack_cc_fl = ProtoField.uint8("mrc.sack.cc_fl", "CC flags", base.DEC, nil, 0x0F),
  sack_mpr = ProtoField.uint8("mrc.sack.mpr", "MPR", base.DEC),
  sack_offset = ProtoField.int16("mrc.sack.sack_offset", "SACK offset", base.DEC),
  sack_bitmap = ProtoField.uint64("mrc.sack.bitmap", "SACK bitmap", base.HEX),
  cc_tx_timestamp = ProtoField.uint16("mrc.cc.tx_timestamp", "TX timestamp", base.DEC),
  cc_ooo_count = ProtoField.uint16("mrc.cc.ooo_count", "Out-of-order count", base.DEC, nil, 0x7FFF),
  cc_r_c = ProtoField.uint8("mrc.cc.r_c", "r_c", base.DEC, nil, 0x80),
  cc_rcv_cwnd_pen = ProtoField.uint8("mrc.cc.rcv_cwnd_pen", "Receiver cwnd penalty", base.DEC, nil, 0x7F),
  cc_rcvd_bytes = ProtoField.uint24("mrc.cc.rcvd_bytes", "Received bytes", base.DEC),
  nack_type = ProtoField.uint16("mrc.nack.type", "Type", base.DEC, nil, 0xF000),
  nack_reason = ProtoField.uint8("mrc.nack.reason", "NACK reason", base.HEX, NACK_REASONS),
  nack_vendor = ProtoField.uint8("mrc.nack.vendor", "Vendor", base.HEX),
  nack_entropy = ProtoField.uint32("mrc.nack.entropy", "Reflected EV", base.HEX),
  nack_spdcid = ProtoField.uint16("mrc.nack.spdcid", "Source PDC", base.DEC),
  nack_dpdcid = ProtoField.uint16("mrc.nack.dpdcid", "Destination PDC", base.DEC),
  nack_psn = ProtoField.uint24("mrc.nack.psn", "NACK PSN", base.DEC),
  nack_cc_type = ProtoField.uint8("mrc.nack.cc_type", "CC type", base.DEC, nil, 0xF0),
  nack_tx_timestamp = ProtoField.uint16("mrc.nack.tx_timestamp", "TX timestamp", base.DEC),
  probe_seq = ProtoField.uint16("mrc.probe.seq", "Probe sequence", base.DEC),
  probe_entropy = ProtoField.uint32("mrc.probe.entropy", "Probed EV", base.HEX),
  probe_spdcid = ProtoField.uint16("mrc.probe.spdcid", "Source PDC", base.DEC),
  probe_dpdcid = ProtoField.uint16("mrc.probe.dpdcid", "Destination PDC", base.DEC),
  probe_psn = ProtoField.uint24("mrc.probe.psn", "PSN", base.DEC),
  ep_type = ProtoField.uint8("mrc.ep.type", "Endpoint request/response type", base.DEC, EP_TYPES),
  ep_flags = ProtoField.uint8("mrc.ep.flags", "Flags / status", base.HEX),
  ep_seq = ProtoField.uint16("mrc.ep.seq", "Sequence", base.DEC),
  ep_entropy = ProtoField.uint32("mrc.ep.entropy", "EV", base.HEX),
  ep_spdcid = ProtoField.uint16("mrc.ep.spdcid", "Source PDC", base.DEC),
  ep_dpdcid = ProtoField.uint16("mrc.ep.dpdcid", "Destination PDC", base.DEC),
  ep_port_status = ProtoField.uint32("mrc.ep.port_status", "Port status (bit p = plane p up)", base.HEX),
  ep_req_timestamp = ProtoField.uint64("mrc.ep.req_timestamp", "Request timestamp", base.DEC),
  ep_resp_timestamp = ProtoField.uint64("mrc.ep.resp_timestamp", "Response timestamp", base.DEC),
}
local list = {}
for _, v in pairs(f) do list[#list + 1] = v end
mrc.fields = list

local e_trimmed = ProtoExpert.new("mrc.trimmed.expert", "Trimmed packet (payload cut by a switch)",
  expert.group.SEQUENCE, expert.severity.NOTE)
local e_short = ProtoExpert.new("mrc.short.expert", "Truncated MRC header",
  expert.group.MALFORMED, expert.severity.ERROR)
mrc.experts = { e_trimmed, e_short }

local udp_srcport = Field.new("udp.srcport")
local ipv6_flow = Field.new("ipv6.flow")
local ipv6_dscp = Field.new("ipv6.tclass.dscp")

local udp_table = DissectorTable.get("udp.port")
local roce = udp_table:get_dissector(4791)

local function add(tree, field, tvb, off, len)
  tree:add(field, tvb(off, len))
  return off + len
end

function mrc.dissector(tvb, pinfo, tree)
  if tvb:len() < 12 then return 0 end
  local op = tvb(0, 1):uint()
  if op < 0xC0 and roce ~= nil then
    return roce:call(tvb, pinfo, tree)
  end
  pinfo.cols.protocol = "MRC"
  local t = tree:add(mrc, tvb(), "MRC " .. (OPCODES[op] or string.format("0x%02x", op)))
  local bth = t:add(mrc, tvb(0, 12), "BTH")
  bth:set_text("Base Transport Header")
  add(bth, f.opcode, tvb, 0, 1)
  add(bth, f.se, tvb, 1, 1)
  add(bth, f.pkey, tvb, 2, 2)
  add(bth, f.dqpn, tvb, 5, 3)
  bth:add(f.ackreq, tvb(8, 1)); bth:add(f.r, tvb(8, 1)); bth:add(f.rtx, tvb(8, 1))
  bth:add(f.ts, tvb(8, 1))
  add(bth, f.psn, tvb, 9, 3)
  local psn = tvb(9, 3):uint()
  local sport, flow = udp_srcport(), ipv6_flow()
  if sport ~= nil and flow ~= nil then
    t:add(f.ev, bit.bor(bit.lshift(sport.value, 16), bit.band(flow.value, 0xFFFF))):set_generated()
  end
  local dscp = ipv6_dscp()
  local trimmed = dscp ~= nil and (dscp.value == 12 or dscp.value == 16) and op >= 0xC6 and op <= 0xCB
  local has_ts = bit.band(tvb(8, 1):uint(), 0x10) ~= 0
  local off = 12
  local need = { [0xD1] = 4, [0xD8] = 16, [0xD9] = 36, [0xDC] = 36, [0xDD] = 20, [0xDE] = 16 }
  local n = need[op]
  if n == nil and op >= 0xC6 and op <= 0xCB then
    n = 4 + 16 + (has_ts and 4 or 0) + ((op == 0xC9 or op == 0xCB) and 4 or 0)
  end
  if n == nil or tvb:len() < 12 + n then
    t:add_proto_expert_info(e_short)
    return tvb:len()
  end
  local info = ""
  if op >= 0xC6 and op <= 0xCB then
    off = add(t, f.rqmsn, tvb, off, 2); off = add(t, f.msn, tvb, off, 2)
    if has_ts then off = add(t, f.timestamp, tvb, off, 4) end
    local va = tvb(off, 8):uint64()
    off = add(t, f.va, tvb, off, 8); off = add(t, f.rkey, tvb, off, 4)
    off = add(t, f.dmalen, tvb, off, 4)
    if op == 0xC9 or op == 0xCB then off = add(t, f.imm, tvb, off, 4) end
    local tail = trimmed and 0 or 4
    local plen = tvb:len() - off - tail
    if plen < 0 then plen = 0 end
    t:add(f.payload_len, plen):set_generated()
    info = string.format("PSN=%d VA=0x%s len=%d", psn, va:tohex(), plen)
    if trimmed then
      t:add(f.trimmed, true):set_generated()
      t:add_proto_expert_info(e_trimmed)
      info = info .. " [TRIMMED]"
    end
  elseif op == 0xD1 then
    off = add(t, f.aeth_syndrome, tvb, off, 1); off = add(t, f.aeth_msn, tvb, off, 3)
  elseif op == 0xDC then
    for _, fl in ipairs({ f.sack_type, f.sack_nxt, f.sack_m, f.sack_pr }) do t:add(fl, tvb(off, 2)) end
    off = off + 2
    off = add(t, f.sack_ack_psn_offset, tvb, off, 2); off = add(t, f.sack_entropy, tvb, off, 4)
    off = add(t, f.sack_spdcid, tvb, off, 2); off = add(t, f.sack_dpdcid, tvb, off, 2)
    off = add(t, f.sack_cack_psn, tvb, off + 1, 3)
    t:add(f.sack_cc_type, tvb(off, 1)); t:add(f.sack_cc_fl, tvb(off, 1)); off = off + 1
    off = add(t, f.sack_mpr, tvb, off, 1); off = add(t, f.sack_offset, tvb, off, 2)
    off = add(t, f.sack_bitmap, tvb, off, 8)
    local cc = t:add(mrc, tvb(off, 8), "CC_STATE")
    off = add(cc, f.cc_tx_timestamp, tvb, off, 2)
    off = add(cc, f.cc_ooo_count, tvb, off, 2)
    cc:add(f.cc_r_c, tvb(off, 1)); cc:add(f.cc_rcv_cwnd_pen, tvb(off, 1)); off = off + 1
    off = add(cc, f.cc_rcvd_bytes, tvb, off, 3)
    info = string.format("cack_psn=%d m=%s", tvb(25, 3):uint(),
      SACK_M[bit.rshift(bit.band(tvb(12, 2):uint(), 0x60), 5)] or "?")
  elseif op == 0xDD then
    t:add(f.nack_type, tvb(off, 2)); off = off + 2
    local reason = tvb(off, 1):uint()
    off = add(t, f.nack_reason, tvb, off, 1); off = add(t, f.nack_vendor, tvb, off, 1)
    off = add(t, f.nack_entropy, tvb, off, 4); off = add(t, f.nack_spdcid, tvb, off, 2)
    off = add(t, f.nack_dpdcid, tvb, off, 2); off = add(t, f.nack_psn, tvb, off + 1, 3)
    t:add(f.nack_cc_type, tvb(off, 1)); off = off + 2
    off = add(t, f.nack_tx_timestamp, tvb, off, 2)
    info = string.format("NACK %s psn=%d", NACK_REASONS[reason] or "?", tvb(25, 3):uint())
  elseif op == 0xDE then
    off = add(t, f.probe_seq, tvb, off + 2, 2); off = add(t, f.probe_entropy, tvb, off, 4)
    off = add(t, f.probe_spdcid, tvb, off, 2); off = add(t, f.probe_dpdcid, tvb, off, 2)
    off = add(t, f.probe_psn, tvb, off + 1, 3)
  elseif op == 0xD8 or op == 0xD9 then
    off = add(t, f.ep_type, tvb, off, 1); off = add(t, f.ep_flags, tvb, off, 1)
    off = add(t, f.ep_seq, tvb, off, 2); off = add(t, f.ep_entropy, tvb, off, 4)
    off = add(t, f.ep_spdcid, tvb, off, 2); off = add(t, f.ep_dpdcid, tvb, off, 2)
    off = add(t, f.ep_port_status, tvb, off, 4)
    if op == 0xD9 then
      off = add(t, f.ep_req_timestamp, tvb, off, 8); off = add(t, f.ep_resp_timestamp, tvb, off, 8)
      off = off + 4
    end
  end
  if not trimmed and tvb:len() >= off + 4 then
    t:add_le(f.icrc, tvb(tvb:len() - 4, 4))
  end
  pinfo.cols.info = (OPCODES[op] or string.format("0x%02x", op)) .. " " .. info
  return tvb:len()
end

udp_table:add(4791, mrc)
