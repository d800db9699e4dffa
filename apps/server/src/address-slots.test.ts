import { EventEmitter } from 'node:events'
import type { Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { AddressSlots, slotOf } from './address-slots'

/** A socket from `remoteAddress` that `close()` closes. */
function socketFrom(remoteAddress: string) {
  const socket = Object.assign(new EventEmitter(), { remoteAddress })
  return { socket: socket as unknown as Socket, close: () => socket.emit('close') }
}

describe('AddressSlots', () => {
  it('caps the connections of one IPv6 /64 together, and of each IPv4 address apart', () => {
    const slots = new AddressSlots(2)
    const a = socketFrom('2001:db8:0:1::a')
    expect(slots.takeSocket(a.socket)).toBe(true)
    expect(slots.takeSocket(socketFrom('2001:db8:0:1:ffff::b').socket)).toBe(true)
    // A third address of the same /64: full (counted per address, it took a slot of its own).
    expect(slots.takeSocket(socketFrom('2001:db8::1:0:0:0:c').socket)).toBe(false)
    expect(slots.takeSocket(socketFrom('2001:db8:0:2::a').socket)).toBe(true)
    a.close()
    expect(slots.takeSocket(socketFrom('2001:0db8:0000:0001::d').socket)).toBe(true)
    expect(slots.takeSocket(socketFrom('10.0.0.1').socket)).toBe(true)
    expect(slots.takeSocket(socketFrom('10.0.0.1').socket)).toBe(true)
    expect(slots.takeSocket(socketFrom('::ffff:10.0.0.1').socket)).toBe(false)
    expect(slots.takeSocket(socketFrom('10.0.0.2').socket)).toBe(true)
  })

  it('names the slot: an IPv4 address as itself, an IPv6 one as its /64', () => {
    expect(slotOf('127.0.0.1')).toBe('127.0.0.1')
    expect(slotOf('::ffff:127.0.0.1')).toBe('127.0.0.1')
    expect(slotOf('::1')).toBe('0:0:0:0::/64')
    expect(slotOf('::')).toBe('0:0:0:0::/64')
    expect(slotOf('2001:DB8:0:1:2:3:4:5')).toBe('2001:db8:0:1::/64')
    expect(slotOf('2001:db8::')).toBe('2001:db8:0:0::/64')
    expect(slotOf('fe80::1%eth0')).toBe('fe80:0:0:0::/64')
    expect(slotOf('64:ff9b::10.0.0.1')).toBe('64:ff9b:0:0::/64')
    expect(slotOf('')).toBe('')
    expect(slotOf('not an address')).toBe('not an address')
  })
})
