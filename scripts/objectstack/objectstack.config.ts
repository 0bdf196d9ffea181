// The app a test node serves: a minimal stack with one code-defined object.
// The end-to-end tests create everything else (objects, views, permission
// sets, datasources) at run time through the node's own API, the way a user
// of the platform does, so that it lands in sys_metadata.
import { defineStack } from '@objectstack/spec';
import { Field, ObjectSchema } from '@objectstack/spec/data';

const rtNote = ObjectSchema.create({
  name: 'rt_note',
  label: 'Note',
  pluralLabel: 'Notes',
  fields: {
    title: Field.text({ label: 'Title', required: true }),
    body: Field.textarea({ label: 'Body' }),
  },
  sharingModel: 'private',
});

export default defineStack({
  manifest: {
    id: 'com.example.rt',
    namespace: 'rt',
    version: '0.1.0',
    type: 'app',
    name: 'Reconciler Test',
    description: 'The app a reconciler end-to-end test node serves',
    engines: { protocol: '^17' },
  },
  objects: [rtNote],
});
