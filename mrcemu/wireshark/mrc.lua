-- Wireshark dissector for MRC (Multipath Reliable Connection) over RoCEv2, OCP-MRC-1.0.
-- Layouts come from mrcemu/wire/layout.py (the generated block below; edit the table and
-- run `make generate`). RoCE opcodes (< 0xC0) are handed to the dissector that owned UDP
-- port 4791 before us (Wireshark's InfiniBand).
-- Install: mrcemu wireshark install   or: wireshark -X lua_script:mrc.lua
local mrc = Proto("mrc", "Multipath Reliable Connection")

-- BEGIN GENERATED from mrcemu/wire/layout.py by `make generate`: do not edit
local V_Opcode = { [0x06] = "RC_WRITE_FIRST", [0x07] = "RC_WRITE_MIDDLE", [0x08] = "RC_WRITE_LAST", [0x09] = "RC_WRITE_LAST_IMM", [0x0A] = "RC_WRITE_ONLY", [0x11] = "RC_ACK", [0x81] = "CNP", [0xC6] = "WRITE_FIRST", [0xC7] = "WRITE_MIDDLE", [0xC8] = "WRITE_LAST", [0xC9] = "WRITE_LAST_IMM", [0xCA] = "WRITE_ONLY", [0xCB] = "WRITE_ONLY_IMM", [0xD1] = "ACKNOWLEDGE", [0xD8] = "ENDPOINT_REQUEST", [0xD9] = "ENDPOINT_RESPONSE", [0xDC] = "RELIABILITY_SACK", [0xDD] = "RELIABILITY_NACK", [0xDE] = "RELIABILITY_PROBE_REQ" }
local V_SackMark = { [0x00] = "NONE", [0x01] = "SKIP_ONCE", [0x02] = "ALWAYS_SKIP" }
local V_NackReason = { [0x01] = "TRIMMED", [0x02] = "TRIMMED_LASTHOP", [0x06] = "NO_BITMAP", [0x07] = "NO_PKT_BUFFER", [0x0A] = "NO_RESOURCE", [0x0B] = "PSN_OOR_WINDOW", [0x19] = "UNEXP_EVENT" }
local V_EndpointOp = { [0x00] = "PORT_STATUS_UPDATE", [0x01] = "EV_PROBE" }
local f = {}
local H = {}
local EV_HIGH_HALF_IN_SPORT = true
local UDP_PORTS = { 4791, 4971 }
f.mrc_opcode = ProtoField.uint8("mrc.opcode", "opcode", base.HEX, V_Opcode, nil)
f.mrc_se = ProtoField.uint8("mrc.se", "se", base.DEC, nil, 0x80)
f.mrc_migreq = ProtoField.uint8("mrc.migreq", "migreq", base.DEC, nil, 0x40)
f.mrc_padcount = ProtoField.uint8("mrc.padcount", "padcount", base.DEC, nil, 0x30)
f.mrc_version = ProtoField.uint8("mrc.version", "version", base.DEC, nil, 0x0F)
f.mrc_pkey = ProtoField.uint16("mrc.pkey", "pkey", base.HEX, nil, nil)
f.mrc_fecn = ProtoField.uint8("mrc.fecn", "fecn", base.DEC, nil, 0x80)
f.mrc_becn = ProtoField.uint8("mrc.becn", "becn", base.DEC, nil, 0x40)
f.mrc_dqpn = ProtoField.uint24("mrc.dqpn", "dqpn", base.DEC, nil, nil)
f.mrc_ackreq = ProtoField.uint8("mrc.ackreq", "ackreq", base.DEC, nil, 0x80)
f.mrc_r = ProtoField.uint8("mrc.r", "r", base.DEC, nil, 0x40)
f.mrc_rtx = ProtoField.uint8("mrc.rtx", "rtx", base.DEC, nil, 0x20)
f.mrc_ts = ProtoField.uint8("mrc.ts", "ts", base.DEC, nil, 0x10)
f.mrc_psn = ProtoField.uint24("mrc.psn", "psn", base.DEC, nil, nil)
f.mrc_rqmsn = ProtoField.uint16("mrc.rqmsn", "rqmsn", base.DEC, nil, nil)
f.mrc_msn = ProtoField.uint16("mrc.msn", "msn", base.DEC, nil, nil)
f.mrc_tseth_ts = ProtoField.uint16("mrc.tseth.ts", "ts", base.DEC, nil, nil)
f.mrc_tseth_tsr = ProtoField.uint8("mrc.tseth.tsr", "tsr", base.DEC, nil, 0x80)
f.mrc_tseth_ftype = ProtoField.uint8("mrc.tseth.ftype", "ftype", base.DEC, nil, 0x0F)
f.mrc_va = ProtoField.uint64("mrc.va", "va", base.HEX, nil, nil)
f.mrc_rkey = ProtoField.uint32("mrc.rkey", "rkey", base.HEX, nil, nil)
f.mrc_dmalen = ProtoField.uint32("mrc.dmalen", "dmalen", base.DEC, nil, nil)
f.mrc_imm = ProtoField.uint32("mrc.imm", "imm", base.HEX, nil, nil)
f.mrc_aeth_syndrome = ProtoField.uint8("mrc.aeth.syndrome", "syndrome", base.HEX, nil, nil)
f.mrc_aeth_msn = ProtoField.uint24("mrc.aeth.msn", "msn", base.DEC, nil, nil)
f.mrc_sack_type = ProtoField.uint8("mrc.sack.type", "type", base.DEC, nil, 0xF0)
f.mrc_sack_nxt = ProtoField.uint16("mrc.sack.nxt", "nxt", base.DEC, nil, 0x0F80)
f.mrc_sack_m = ProtoField.uint8("mrc.sack.m", "m", base.DEC, V_SackMark, 0x60)
f.mrc_sack_pr = ProtoField.uint8("mrc.sack.pr", "pr", base.DEC, nil, 0x02)
f.mrc_sack_ack_psn_offset = ProtoField.int16("mrc.sack.ack_psn_offset", "ack_psn_offset", base.DEC, nil, nil)
f.mrc_sack_entropy = ProtoField.uint32("mrc.sack.entropy", "entropy", base.HEX, nil, nil)
f.mrc_sack_spdcid = ProtoField.uint16("mrc.sack.spdcid", "spdcid", base.DEC, nil, nil)
f.mrc_sack_dpdcid = ProtoField.uint16("mrc.sack.dpdcid", "dpdcid", base.DEC, nil, nil)
f.mrc_sack_cack_psn = ProtoField.uint24("mrc.sack.cack_psn", "cack_psn", base.DEC, nil, nil)
f.mrc_sack_cc_type = ProtoField.uint8("mrc.sack.cc_type", "cc_type", base.DEC, nil, 0xF0)
f.mrc_sack_cc_fl = ProtoField.uint8("mrc.sack.cc_fl", "cc_fl", base.DEC, nil, 0x0F)
f.mrc_sack_mpr = ProtoField.uint8("mrc.sack.mpr", "mpr", base.DEC, nil, nil)
f.mrc_sack_sack_offset = ProtoField.int16("mrc.sack.sack_offset", "sack_offset", base.DEC, nil, nil)
f.mrc_sack_bitmap = ProtoField.uint64("mrc.sack.bitmap", "bitmap", base.HEX, nil, nil)
f.mrc_cc_tx_timestamp = ProtoField.uint16("mrc.cc.tx_timestamp", "tx_timestamp", base.DEC, nil, nil)
f.mrc_cc_ooo_count = ProtoField.uint16("mrc.cc.ooo_count", "ooo_count", base.DEC, nil, 0x7FFF)
f.mrc_cc_r_c = ProtoField.uint8("mrc.cc.r_c", "r_c", base.DEC, nil, 0x80)
f.mrc_cc_rcv_cwnd_pen = ProtoField.uint8("mrc.cc.rcv_cwnd_pen", "rcv_cwnd_pen", base.DEC, nil, 0x7F)
f.mrc_cc_rcvd_bytes = ProtoField.uint24("mrc.cc.rcvd_bytes", "rcvd_bytes", base.DEC, nil, nil)
f.mrc_nack_type = ProtoField.uint8("mrc.nack.type", "type", base.DEC, nil, 0xF0)
f.mrc_nack_nxt = ProtoField.uint16("mrc.nack.nxt", "nxt", base.DEC, nil, 0x0F80)
f.mrc_nack_reason = ProtoField.uint8("mrc.nack.reason", "reason", base.HEX, V_NackReason, nil)
f.mrc_nack_vendor = ProtoField.uint8("mrc.nack.vendor", "vendor", base.HEX, nil, nil)
f.mrc_nack_entropy = ProtoField.uint32("mrc.nack.entropy", "entropy", base.HEX, nil, nil)
f.mrc_nack_spdcid = ProtoField.uint16("mrc.nack.spdcid", "spdcid", base.DEC, nil, nil)
f.mrc_nack_dpdcid = ProtoField.uint16("mrc.nack.dpdcid", "dpdcid", base.DEC, nil, nil)
f.mrc_nack_psn = ProtoField.uint24("mrc.nack.psn", "psn", base.DEC, nil, nil)
f.mrc_nack_cc_type = ProtoField.uint8("mrc.nack.cc_type", "cc_type", base.DEC, nil, 0xF0)
f.mrc_nack_cc_fl = ProtoField.uint8("mrc.nack.cc_fl", "cc_fl", base.DEC, nil, 0x0F)
f.mrc_nack_tx_timestamp = ProtoField.uint16("mrc.nack.tx_timestamp", "tx_timestamp", base.DEC, nil, nil)
f.mrc_probe_type = ProtoField.uint8("mrc.probe.type", "type", base.DEC, nil, 0xF0)
f.mrc_probe_nxt = ProtoField.uint16("mrc.probe.nxt", "nxt", base.DEC, nil, 0x0F80)
f.mrc_probe_vendor = ProtoField.uint8("mrc.probe.vendor", "vendor", base.HEX, nil, nil)
f.mrc_probe_id = ProtoField.uint16("mrc.probe.id", "id", base.DEC, nil, nil)
f.mrc_probe_spdcid = ProtoField.uint16("mrc.probe.spdcid", "spdcid", base.DEC, nil, nil)
f.mrc_probe_dpdcid = ProtoField.uint16("mrc.probe.dpdcid", "dpdcid", base.DEC, nil, nil)
f.mrc_probe_ts = ProtoField.uint16("mrc.probe.ts", "ts", base.DEC, nil, nil)
f.mrc_probe_tsr = ProtoField.uint8("mrc.probe.tsr", "tsr", base.DEC, nil, 0x80)
f.mrc_probe_ftype = ProtoField.uint8("mrc.probe.ftype", "ftype", base.DEC, nil, 0x0F)
f.mrc_ep_type = ProtoField.uint8("mrc.ep.type", "type", base.DEC, nil, 0xF0)
f.mrc_ep_nxt = ProtoField.uint16("mrc.ep.nxt", "nxt", base.DEC, nil, 0x0F80)
f.mrc_ep_op = ProtoField.uint8("mrc.ep.op", "op", base.DEC, V_EndpointOp, 0x03)
f.mrc_ep_vendor = ProtoField.uint8("mrc.ep.vendor", "vendor", base.HEX, nil, nil)
f.mrc_ep_port_status = ProtoField.uint32("mrc.ep.port_status", "port_status", base.HEX, nil, nil)
f.mrc_ep_ts = ProtoField.uint16("mrc.ep.ts", "ts", base.DEC, nil, nil)
f.mrc_ep_tsr = ProtoField.uint8("mrc.ep.tsr", "tsr", base.DEC, nil, 0x80)
f.mrc_ep_ftype = ProtoField.uint8("mrc.ep.ftype", "ftype", base.DEC, nil, 0x0F)
f.mrc_ep_resp_op = ProtoField.uint8("mrc.ep.resp_op", "resp_op", base.DEC, V_EndpointOp, 0x0C)
f.ev_plane = ProtoField.uint16("mrc.ev.plane", "plane", base.DEC)
f.ev_spine = ProtoField.uint16("mrc.ev.spine", "spine", base.DEC)
f.ev_variant = ProtoField.uint16("mrc.ev.variant", "variant", base.DEC)
f.ev_index = ProtoField.uint16("mrc.ev.index", "index", base.DEC)
H.BTH = { len = 12, off = { opcode = 0, solicited = 1, migreq = 1, padcount = 1, version = 1, pkey = 2, fecn = 4, becn = 4, resv6 = 4, dqpn = 5, ackreq = 8, r = 8, rtx = 8, ts = 8, resv4 = 8, psn = 9 },
  show = { { f.mrc_opcode, 0, 1 }, { f.mrc_se, 1, 1 }, { f.mrc_migreq, 1, 1 }, { f.mrc_padcount, 1, 1 }, { f.mrc_version, 1, 1 }, { f.mrc_pkey, 2, 2 }, { f.mrc_fecn, 4, 1 }, { f.mrc_becn, 4, 1 }, { f.mrc_dqpn, 5, 3 }, { f.mrc_ackreq, 8, 1 }, { f.mrc_r, 8, 1 }, { f.mrc_rtx, 8, 1 }, { f.mrc_ts, 8, 1 }, { f.mrc_psn, 9, 3 } } }
H.METH = { len = 4, off = { rqmsn = 0, msn = 2 },
  show = { { f.mrc_rqmsn, 0, 2 }, { f.mrc_msn, 2, 2 } } }
H.TSETH = { len = 4, off = { tx_timestamp = 0, tsr = 2, rsv = 2, ftype = 3 },
  show = { { f.mrc_tseth_ts, 0, 2 }, { f.mrc_tseth_tsr, 2, 1 }, { f.mrc_tseth_ftype, 3, 1 } } }
H.RETH = { len = 16, off = { va = 0, rkey = 8, dmalen = 12 },
  show = { { f.mrc_va, 0, 8 }, { f.mrc_rkey, 8, 4 }, { f.mrc_dmalen, 12, 4 } } }
H.ImmDt = { len = 4, off = { imm = 0 },
  show = { { f.mrc_imm, 0, 4 } } }
H.AETH = { len = 4, off = { syndrome = 0, msn = 1 },
  show = { { f.mrc_aeth_syndrome, 0, 1 }, { f.mrc_aeth_msn, 1, 3 } } }
H.SETH = { len = 28, off = { type = 0, nxt = 0, m = 1, rsv0 = 1, pr = 1, rsv00 = 1, ack_psn_offset = 2, entropy = 4, spdcid = 8, dpdcid = 10, rsv1 = 12, cack_psn = 13, cc_type = 16, cc_fl = 16, mpr = 17, sack_offset = 18, sack_bitmap = 20 },
  show = { { f.mrc_sack_type, 0, 1 }, { f.mrc_sack_nxt, 0, 2 }, { f.mrc_sack_m, 1, 1 }, { f.mrc_sack_pr, 1, 1 }, { f.mrc_sack_ack_psn_offset, 2, 2 }, { f.mrc_sack_entropy, 4, 4 }, { f.mrc_sack_spdcid, 8, 2 }, { f.mrc_sack_dpdcid, 10, 2 }, { f.mrc_sack_cack_psn, 13, 3 }, { f.mrc_sack_cc_type, 16, 1 }, { f.mrc_sack_cc_fl, 16, 1 }, { f.mrc_sack_mpr, 17, 1 }, { f.mrc_sack_sack_offset, 18, 2 }, { f.mrc_sack_bitmap, 20, 8 } } }
H.CC_STATE = { len = 8, off = { tx_timestamp = 0, rsv = 2, ooo_count = 2, r_c = 4, rcv_cwnd_pen = 4, rcvd_bytes = 5 },
  show = { { f.mrc_cc_tx_timestamp, 0, 2 }, { f.mrc_cc_ooo_count, 2, 2 }, { f.mrc_cc_r_c, 4, 1 }, { f.mrc_cc_rcv_cwnd_pen, 4, 1 }, { f.mrc_cc_rcvd_bytes, 5, 3 } } }
H.NETH = { len = 20, off = { type = 0, nxt = 0, rsv0 = 1, nack_reason = 2, vendor = 3, entropy = 4, spdcid = 8, dpdcid = 10, rsv1 = 12, nack_psn = 13, cc_type = 16, cc_fl = 16, rsv2 = 17, tx_timestamp = 18 },
  show = { { f.mrc_nack_type, 0, 1 }, { f.mrc_nack_nxt, 0, 2 }, { f.mrc_nack_reason, 2, 1 }, { f.mrc_nack_vendor, 3, 1 }, { f.mrc_nack_entropy, 4, 4 }, { f.mrc_nack_spdcid, 8, 2 }, { f.mrc_nack_dpdcid, 10, 2 }, { f.mrc_nack_psn, 13, 3 }, { f.mrc_nack_cc_type, 16, 1 }, { f.mrc_nack_cc_fl, 16, 1 }, { f.mrc_nack_tx_timestamp, 18, 2 } } }
H.PETH = { len = 16, off = { type = 0, nxt = 0, rsv0 = 1, rsv1 = 2, vendor = 3, probe_id = 4, rsv2 = 6, spdcid = 8, dpdcid = 10, tx_timestamp = 12, tsr = 14, rsv3 = 14, ftype = 15 },
  show = { { f.mrc_probe_type, 0, 1 }, { f.mrc_probe_nxt, 0, 2 }, { f.mrc_probe_vendor, 3, 1 }, { f.mrc_probe_id, 4, 2 }, { f.mrc_probe_spdcid, 8, 2 }, { f.mrc_probe_dpdcid, 10, 2 }, { f.mrc_probe_ts, 12, 2 }, { f.mrc_probe_tsr, 14, 1 }, { f.mrc_probe_ftype, 15, 1 } } }
H.ERTH = { len = 16, off = { type = 0, nxt = 0, rsv0 = 1, op = 1, rsv1 = 2, vendor = 3, port_status_mask = 4, rsv2 = 8, tx_timestamp = 12, tsr = 14, rsv3 = 14, ftype = 15 },
  show = { { f.mrc_ep_type, 0, 1 }, { f.mrc_ep_nxt, 0, 2 }, { f.mrc_ep_op, 1, 1 }, { f.mrc_ep_vendor, 3, 1 }, { f.mrc_ep_port_status, 4, 4 }, { f.mrc_ep_ts, 12, 2 }, { f.mrc_ep_tsr, 14, 1 }, { f.mrc_ep_ftype, 15, 1 } } }
H.EETH = { len = 36, off = { type = 0, nxt = 0, rsv0 = 1, op = 1, rsv1 = 1, rsv2 = 2, rsv3 = 10, rsv4 = 18, rsv5 = 26, tx_timestamp = 28, rsv6 = 30 },
  show = { { f.mrc_ep_type, 0, 1 }, { f.mrc_ep_nxt, 0, 2 }, { f.mrc_ep_resp_op, 1, 1 }, { f.mrc_ep_ts, 28, 2 } } }
H.CNP = { len = 16, off = { rsv0 = 0, rsv1 = 8 },
  show = {  } }
local EV_FIELDS = { { f.ev_plane, 26, 4 }, { f.ev_spine, 16, 10 }, { f.ev_variant, 12, 4 }, { f.ev_index, 0, 12 } }  -- { field, lowest bit, bits }
-- END GENERATED
local OPCODES, NACK_REASONS, SACK_M = V_Opcode, V_NackReason, V_SackMark

-- Fields no header holds: derived from the packet around MRC.
f.ev = ProtoField.uint32("mrc.ev", "Entropy value (UDP sport << 16 | flow label)", base.HEX)
f.trimmed = ProtoField.bool("mrc.trimmed", "Trimmed")
f.payload_len = ProtoField.uint32("mrc.payload_len", "Payload length", base.DEC)
f.icrc = ProtoField.uint32("mrc.icrc", "ICRC", base.HEX)
local list = {}
for _, v in pairs(f) do list[#list + 1] = v end
mrc.fields = list

local e_trimmed = ProtoExpert.new("mrc.trimmed.expert", "Trimmed packet (payload cut by a switch)",
  expert.group.SEQUENCE, expert.severity.NOTE)
local e_short = ProtoExpert.new("mrc.short.expert", "Truncated MRC header",
  expert.group.MALFORMED, expert.severity.ERROR)
local e_nack = ProtoExpert.new("mrc.nack.expert", "NACK",
  expert.group.SEQUENCE, expert.severity.WARN)
local e_rtx = ProtoExpert.new("mrc.rtx.expert", "Retransmission",
  expert.group.SEQUENCE, expert.severity.NOTE)
local e_snapped = ProtoExpert.new("mrc.snapped.expert",
  "Headers cut by the capture's snap length (not malformed)",
  expert.group.UNDECODED, expert.severity.NOTE)
mrc.experts = { e_trimmed, e_short, e_nack, e_rtx, e_snapped }

-- An MRC packet has two IPv6 headers (outer: the uSID path; inner: the port). A field
-- extractor returns both; the first, the outer, is what the network marked.
local udp_srcport = Field.new("udp.srcport")
local ipv6_flow = Field.new("ipv6.flow")
local ipv6_dscp = Field.new("ipv6.tclass.dscp")

-- An EV (32 bits) with its subfields under it; also the text for the Info column.
local function add_ev(tree, ev)
  local item = tree:add(f.ev, ev)
  for _, e in ipairs(EV_FIELDS) do
    item:add(e[1], math.floor(ev / 2 ^ e[2]) % 2 ^ e[3]):set_generated()
  end
  return item, string.format(" ev=0x%08x", ev)
end

local udp_table = DissectorTable.get("udp.port")
local roce = udp_table:get_dissector(4791)

-- Headers after BTH, per control opcode (data opcodes depend on BTH.ts and the opcode).
local CONTROL = {
  [0xD1] = { H.AETH }, [0x11] = { H.AETH }, [0xD8] = { H.ERTH }, [0xD9] = { H.EETH },
  [0xDC] = { H.SETH, H.CC_STATE }, [0xDD] = { H.NETH }, [0xDE] = { H.PETH },
}

-- Every shown field of header `h` at `off`; returns the offset after it.
local function add_header(tree, h, tvb, off)
  for _, e in ipairs(h.show) do tree:add(e[1], tvb(off + e[2], e[3])) end
  return off + h.len
end

function mrc.dissector(tvb, pinfo, tree)
  if tvb:len() < 12 then return 0 end
  local op = tvb(0, 1):uint()
  if op < 0xC0 and roce ~= nil then
    return roce:call(tvb, pinfo, tree)
  end
  pinfo.cols.protocol = "MRC"
  local t = tree:add(mrc, tvb(), "MRC " .. (OPCODES[op] or string.format("0x%02x", op)))
  local bth = t:add(mrc, tvb(0, H.BTH.len), "Base Transport Header")
  add_header(bth, H.BTH, tvb, 0)
  local psn = tvb(H.BTH.off.psn, 3):uint()
  local sport, flow = udp_srcport(), ipv6_flow()
  local ev_text = ""
  if sport ~= nil and flow ~= nil then
    local hi, lo = sport.value, flow.value % 0x10000
    if not EV_HIGH_HALF_IN_SPORT then hi, lo = lo, hi end
    local item
    item, ev_text = add_ev(t, hi * 0x10000 + lo)
    item:set_generated()
  end
  local is_data = op >= 0xC6 and op <= 0xCB
  local dscp = ipv6_dscp()
  local trimmed = dscp ~= nil and (dscp.value == 12 or dscp.value == 16) and is_data
  local has_ts = bit.band(tvb(H.BTH.off.ts, 1):uint(), 0x10) ~= 0
  local chain = CONTROL[op]
  if is_data then
    chain = { H.METH }
    if has_ts then chain[#chain + 1] = H.TSETH end
    chain[#chain + 1] = H.RETH
    if op == 0xC9 or op == 0xCB then chain[#chain + 1] = H.ImmDt end
  end
  local n = 0
  for _, h in ipairs(chain or {}) do n = n + h.len end
  if chain == nil or tvb:len() < H.BTH.len + n then
    if chain ~= nil and tvb:reported_len() >= H.BTH.len + n then
      -- On the wire the headers were whole: the capture kept fewer bytes.
      t:add_proto_expert_info(e_snapped)
      pinfo.cols.info = (OPCODES[op] or string.format("0x%02x", op)) .. " PSN=" .. psn
        .. " [SNAPPED]"
      return tvb:len()
    end
    t:add_proto_expert_info(e_short)
    return tvb:len()
  end
  local off = H.BTH.len
  local at = {}
  for _, h in ipairs(chain) do
    at[h] = off
    local sub = t
    if h == H.CC_STATE then sub = t:add(mrc, tvb(off, h.len), "CC_STATE") end
    off = add_header(sub, h, tvb, off)
  end
  local info = ""
  if is_data then
    local va = tvb(at[H.RETH] + H.RETH.off.va, 8):uint64()
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
    if bit.band(tvb(H.BTH.off.rtx, 1):uint(), 0x20) ~= 0 then
      t:add_proto_expert_info(e_rtx)
      info = info .. " [RTX]"
    end
  elseif op == 0xDC then
    -- The EV the SACK reflects (of the packet that triggered it), not its own path's.
    local s = at[H.SETH]
    local _, ev = add_ev(t:add(mrc, tvb(s + H.SETH.off.entropy, 4), "Reflected EV"),
      tvb(s + H.SETH.off.entropy, 4):uint())
    info = string.format("cack_psn=%d m=%s", tvb(s + H.SETH.off.cack_psn, 3):uint(),
      SACK_M[bit.rshift(bit.band(tvb(s + H.SETH.off.m, 1):uint(), 0x60), 5)] or "?") .. ev
  elseif op == 0xDD then
    local s = at[H.NETH]
    local reason = NACK_REASONS[tvb(s + H.NETH.off.nack_reason, 1):uint()] or "?"
    local _, ev = add_ev(t:add(mrc, tvb(s + H.NETH.off.entropy, 4), "Reflected EV"),
      tvb(s + H.NETH.off.entropy, 4):uint())
    info = string.format("NACK %s psn=%d", reason, tvb(s + H.NETH.off.nack_psn, 3):uint()) .. ev
    t:add_proto_expert_info(e_nack, "NACK " .. reason)
  elseif op == 0xDE then
    info = "probe" .. ev_text
  end
  if not trimmed and tvb:len() >= off + 4 then
    t:add_le(f.icrc, tvb(tvb:len() - 4, 4))
  end
  pinfo.cols.info = (OPCODES[op] or string.format("0x%02x", op)) .. " " .. info
  return tvb:len()
end

for _, port in ipairs(UDP_PORTS) do udp_table:add(port, mrc) end
