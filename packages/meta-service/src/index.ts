export { QUEUE_NAME_LENGTH_MAX, queueNameProblem } from './queue-name'
