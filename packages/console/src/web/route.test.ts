import { describe, expect, it } from 'vitest'
import { parseRoute } from './route'

describe('parseRoute', () => {
  it('names the view of the location hash, the cluster by default', () => {
    expect(parseRoute('')).toEqual({ view: 'cluster' })
    expect(parseRoute('#/cluster')).toEqual({ view: 'cluster' })
    expect(parseRoute('#/groups')).toEqual({ view: 'groups' })
    expect(parseRoute('#/queues')).toEqual({ view: 'queues' })
    expect(parseRoute('#/queues/')).toEqual({ view: 'queues' })
    expect(parseRoute('#/queues/jobs%2Fa%20b')).toEqual({ view: 'queue', name: 'jobs/a b' })
    expect(parseRoute('#queues/j%C3%B6bs')).toEqual({ view: 'queue', name: 'jöbs' })
  })

  it('gives the queues view for a queue name that is not valid percent-encoding', () => {
    expect(parseRoute('#/queues/%E0%A4%A')).toEqual({ view: 'queues' })
    expect(parseRoute('#/queues/%')).toEqual({ view: 'queues' })
  })
})
